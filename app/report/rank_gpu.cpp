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

std::vector<std::string> gpu_numa_warnings(const std::vector<RankInfo>& ranks) {
  std::vector<std::string> warnings;
  for (const RankInfo& r : ranks) {
    // A single-socket host reports no NUMA node for its devices: nothing to compare.
    if (r.gpu_uuid.empty() || r.gpu_numa_node < 0 || r.numa_nodes.empty()) continue;
    const std::vector<int> nodes = parse_cpulist(r.numa_nodes);
    if (std::find(nodes.begin(), nodes.end(), r.gpu_numa_node) != nodes.end()) continue;
    warnings.push_back("rank " + std::to_string(r.rank) + " on " + r.host + " drives GPU " +
                       r.gpu_uuid + " (PCI " + r.gpu_pci_bus_id + ") on NUMA node " +
                       std::to_string(r.gpu_numa_node) + ", but runs on CPUs of NUMA node(s) " +
                       r.numa_nodes +
                       ": its host-device copies cross the socket link (bind ranks to the GPU's "
                       "socket, e.g. srun --gpu-bind=closest --cpu-bind=cores)");
  }
  return warnings;
}

}  // namespace tp
