#pragma once
// The NIC a rank's traffic to other nodes is expected to leave by, named for the pairwise pass's
// findings (docs/sweep.md, "Rails"): `vc-n3 rail 1 (mlx5_1)`. The transport's own settings come
// first, where they name NICs (NCCL_IB_HCA, UCX_NET_DEVICES, Open MPI's include lists); else the
// NICs on the rank's NUMA node (its GPU's, or its CPUs' when they lie on one node). Among several
// candidates, the rank's place on its node picks one in turn. Read from a sysfs root, so tests
// feed it fixture trees; "" when the node has no NIC to name.
#include <string>
#include <vector>

#include "fabric/sysfs_topology.h"

namespace tp {

// The settings that name NICs, as the environment holds them ("" when unset).
struct TransportSettings {
  std::string nccl_ib_hca, ucx_net_devices, ompi_tcp_if_include, ompi_openib_if_include;
  std::string fi_tcp_iface;  // libfabric's tcp provider, under Open MPI's ofi MTL
};
TransportSettings transport_settings_from_environment();

// The device names a setting lists, without ports (`mlx5_0:1` -> `mlx5_0`) or the `=` of an exact
// match; none for an exclusion list (`^mlx5_0`) or an address range (`10.0.0.0/8`).
std::vector<std::string> nics_named_by(const std::string& setting);

struct RankNic {
  std::string name;    // mlx5_3, eth0; "" when none can be named
  std::string source;  // "NCCL_IB_HCA", "UCX_NET_DEVICES", ..., "NUMA node 1", "the node's NICs"
  int numa_node = -1;  // the NIC's, -1 when sysfs does not say
};

// `numa_node`: of the rank's GPU, or of its CPUs (-1 when not known); `nccl`: the collective is
// NCCL (NCCL_IB_HCA applies), else MPI (UCX and Open MPI's lists apply).
RankNic rank_nic(const std::string& sysfs_root, int local_rank, int numa_node, bool nccl,
                 const TransportSettings& settings);

// The PCI address of a NIC as rank_nic names it (an RDMA device, else a network interface): the
// device its sysfs entry links to; "" for a virtual interface or a name not found.
std::string nic_pci_address(const std::string& sysfs_root, const std::string& name);

// The PCIe links a pairwise pass loads, of a node's `links`: a NIC's only when its address is one
// of `nic_addresses` (the NICs its rail ranks use; every NIC's when none could be named), a GPU's
// only when the collective runs on the GPUs (an idle device lowers its link speed).
std::vector<PcieLinkFacts> links_in_use(const std::vector<PcieLinkFacts>& links,
                                        const std::vector<std::string>& nic_addresses,
                                        bool gpus_in_use);

// The NUMA node of the CPUs this process may run on, when they all lie on one; else -1.
int numa_node_of_this_process(const std::string& sysfs_root);

}  // namespace tp
