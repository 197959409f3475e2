#include "app/report/rank_gpu.h"

#include <algorithm>

#include "common/sysinfo.h"

namespace tp {

nlohmann::json rank_gpu_json(const RankInfo& rank) {
  if (rank.gpu_uuid.empty()) return nullptr;
  return {{"uuid", rank.gpu_uuid},
          {"pci_bus_id", rank.gpu_pci_bus_id},
          {"numa_node",
           rank.gpu_numa_node < 0 ? nlohmann::json(nullptr) : nlohmann::json(rank.gpu_numa_node)},
          {"cuda_visible_devices", rank.cuda_visible_devices.empty()
                                       ? nlohmann::json(nullptr)
                                       : nlohmann::json(rank.cuda_visible_devices)}};
}

nlohmann::json rank_nic_json(const RankInfo& rank) {
  if (rank.nic.empty()) return nullptr;
  return {{"name", rank.nic},
          {"source", rank.nic_source},
          {"numa_node",
           rank.nic_numa_node < 0 ? nlohmann::json(nullptr) : nlohmann::json(rank.nic_numa_node)}};
}

std::map<std::string, std::vector<std::string>> affinity_reasons(
    const std::vector<RankInfo>& ranks) {
  std::map<std::string, std::vector<std::string>> reasons;
  for (const RankInfo& r : ranks) {
    // A single-socket host reports no NUMA node for its devices: nothing to compare.
    if (r.gpu_uuid.empty() || r.gpu_numa_node < 0) continue;
    const std::string gpu = "rank " + std::to_string(r.rank) + " drives GPU " + r.gpu_uuid +
                            " (PCI " + r.gpu_pci_bus_id + ") on NUMA node " +
                            std::to_string(r.gpu_numa_node);
    const std::vector<int> nodes = parse_cpulist(r.numa_nodes);
    if (!r.numa_nodes.empty() &&
        std::find(nodes.begin(), nodes.end(), r.gpu_numa_node) == nodes.end())
      reasons[r.host].push_back(gpu + ", but runs on CPUs of NUMA node(s) " + r.numa_nodes +
                                ": its host-device copies cross the socket link (bind ranks to "
                                "the GPU's socket, e.g. srun --gpu-bind=closest --cpu-bind=cores)");
    if (!r.nic.empty() && r.nic_numa_node >= 0 && r.nic_numa_node != r.gpu_numa_node)
      reasons[r.host].push_back(gpu + ", but its NIC " + r.nic + " (" + r.nic_source +
                                ") is on NUMA node " + std::to_string(r.nic_numa_node) +
                                ": its GPUDirect RDMA traffic crosses the socket link (name the "
                                "GPU's nearest NIC for the rank, or leave NCCL_IB_HCA unset)");
  }
  return reasons;
}

}  // namespace tp
