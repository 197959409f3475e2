#include "app/topology_facts.h"

#include <spdlog/spdlog.h>

#include "app/context.h"

namespace tp {
namespace {

using nlohmann::json;

// The software stack and GPUs of this node, for the report and for the comparison.
void add_stack(NodeTopology& node, const Backends& backends) {
  node.extra["versions"] = {{"mpi", mpi_library_version()}};
  node.extra_facts["MPI library"] = mpi_library_version();
  node.extra["nvidia_smi_topo"] = nvidia_smi_topology();
  if (!backends.gpu) return;
  const GpuVersions v = backends.gpu->versions();
  const std::string driver = nvidia_smi_query("driver_version");
  node.extra["versions"]["nccl"] = nccl_version_string(v.nccl);
  node.extra["versions"]["cuda"] = cuda_version_string(v.cuda_runtime);
  node.extra["versions"]["driver"] = driver;
  const std::vector<GpuDevice> gpus = backends.gpu->inventory();
  node.extra["gpus"] = gpu_inventory(gpus, node.host);
  node.extra_facts["NCCL"] = nccl_version_string(v.nccl);
  node.extra_facts["CUDA runtime"] = cuda_version_string(v.cuda_runtime);
  node.extra_facts["driver"] = driver;
  node.extra_facts["GPUs"] = std::to_string(gpus.size());
  if (!gpus.empty()) node.extra_facts["GPU model"] = gpus.front().name;
}

}  // namespace

TopologyPreflight run_topology_preflight(const TrainConfig& cfg, const World& world,
                                         const Backends& backends) {
  if (!cfg.preflight_topology) {
    TopologyPreflight off;
    for (const std::string& host : world.hosts) off.nodes.push_back({{"host", host}});
    return off;
  }
  NodeTopology mine;
  if (world.index_on_host() == 0) {
    const bool fixture = cfg.test.sysfs_root_rank == world.rank && !cfg.test.sysfs_root.empty();
    mine = read_node_topology(world.host, fixture ? cfg.test.sysfs_root : "/sys");
    add_stack(mine, backends);
  }
  TopologyPreflight preflight = gather_topology(world, mine);
  if (world.rank == 0)
    for (const auto& [host, reasons] : preflight.judgement.reasons)
      for (const std::string& why : reasons) spdlog::warn("{}: {}", host, why);
  return preflight;
}

}  // namespace tp
