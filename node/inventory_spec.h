#pragma once
// What a host type must have (docs/node-check.md, "An inventory per host type"): the [inventory]
// section of a host file (scenarios/hosts/*.ini). Every key is optional and a key not given is
// not judged, so a CPU host file states minimums only and holds on any machine of its kind.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "node/xid_rules.h"

namespace tp {

// A mount that must exist, with the free space it must keep.
struct MountSpec {
  std::string path;
  double min_free_gb = 0;
};

struct InventorySpec {
  // GPUs: the count on the PCI bus and by the driver, what they are, and how they are set up.
  std::optional<int> gpus;
  std::string gpu_name;                   // a part of the driver's name: "H200"
  std::optional<unsigned> gpu_device_id;  // the PCI device id: 0x2335 for H200 SXM
  std::optional<double> min_gpu_memory_gb;
  std::string driver_version;      // exactly this, "550.54.15"
  std::string min_driver_version;  // at least this, compared field by field
  std::string min_cuda_driver_version;
  std::string min_nccl_version;
  std::optional<int> nvlinks_per_gpu;
  std::optional<int> gpu_pcie_gen, gpu_pcie_width;  // what each GPU's link can do, at least
  std::optional<bool> same_gpu_firmware;            // one driver and VBIOS on every GPU
  std::optional<bool> ecc, mig, persistence;        // on, off, on
  // RDMA NICs (class/infiniband ports) of the link layer named, each at the rate given.
  std::optional<int> nics;
  std::string nic_link_layer;  // "InfiniBand" or "Ethernet" (RoCE)
  std::optional<double> min_nic_rate_gbps;
  std::optional<int> nic_pcie_gen, nic_pcie_width;
  std::optional<bool> ib_ports_active;  // every port ACTIVE and LinkUp
  // Any host.
  std::optional<int> min_network_interfaces;  // up, loopback aside: a CPU host's fabric
  std::optional<double> min_host_memory_gb;
  std::optional<int> min_cpus;
  std::string cpu_model;  // a part of /proc/cpuinfo's model name
  std::vector<MountSpec> mounts;
  // The host file's [health] section: the health rules' overrides (docs/node-check.md).
  std::optional<double> clock_event_share;
  XidOverrides xids;
  // Absolute floors of node-check --level=full's figures (0: none).
  double min_gemm_tflops = 0, min_memory_copy_gbps = 0, min_h2d_gbps = 0, min_d2h_gbps = 0,
         min_peer_copy_gbps = 0;

  bool empty() const;  // no [inventory] key ([health] aside)
};

// One [inventory] line as the host file gave it, for the message that names it.
struct InventoryLine {
  std::string value;
  int line = 0;
};
using InventoryLines = std::map<std::string, InventoryLine>;

// Every key an [inventory] section may hold, with what its value is, for errors and --help.
const std::vector<std::pair<std::string, std::string>>& inventory_keys();

// Reads the lines of an [inventory] section, and of a [health] section as "health.KEY". UsageError
// (exit 2) names the file, the line, the key and the value for an unknown key or a value of the
// wrong kind.
InventorySpec parse_inventory(const std::string& path, const InventoryLines& lines);

// "550.54.15" against "550.54": -1, 0 or 1 comparing field by field as numbers (a missing field
// is 0); nullopt when either is not dotted numbers.
std::optional<int> compare_versions(const std::string& a, const std::string& b);

}  // namespace tp
