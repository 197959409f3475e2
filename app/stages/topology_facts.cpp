#include "app/stages/topology_facts.h"

#include <spdlog/spdlog.h>

#include "app/report/context.h"
#include "app/report/report_text.h"

namespace tp {
namespace {

using nlohmann::json;

// NCCL_* settings that differ between nodes make them behave differently; compared as one fact.
std::string joined_settings(const json& environment) {
  std::string text;
  for (auto it = environment.begin(); it != environment.end(); ++it)
    if (it.key().rfind("NCCL_", 0) == 0)
      text += (text.empty() ? "" : " ") + it.key() + "=" + it.value().get<std::string>();
  return text.empty() ? "(none)" : text;
}

// The software stack and GPUs of this node (`gpus`: every local rank's view, merged), for the
// report and for the comparison.
void add_stack(NodeTopology& node, const Backends& backends, const json& gpus) {
  node.extra["versions"] = {{"mpi", mpi_library_version()}};
  node.extra_facts["MPI library"] = mpi_library_version();
  node.extra["nvidia_smi_topo"] = nvidia_smi_topology();
  node.extra["environment"] = node_gpu_environment(process_environment());
  if (!backends.gpu) return;
  const GpuVersions v = backends.gpu->versions();
  const std::string driver = nvidia_smi_query("driver_version");
  node.extra["versions"]["nccl"] = nccl_version_string(v.nccl);
  node.extra["versions"]["cuda"] = cuda_version_string(v.cuda_runtime);
  node.extra["versions"]["driver"] = driver;
  node.extra["gpus"] = gpus;
  node.extra_facts["NCCL"] = nccl_version_string(v.nccl);
  node.extra_facts["CUDA runtime"] = cuda_version_string(v.cuda_runtime);
  node.extra_facts["driver"] = driver;
  node.extra_facts["GPUs"] = std::to_string(gpus.size());
  if (!gpus.empty()) node.extra_facts["GPU model"] = gpus.front().value("name", "");
  node.extra_facts["NCCL_* variables"] = joined_settings(node.extra["environment"]);
}

}  // namespace

TopologyPreflight run_topology_preflight(const TrainConfig& cfg, const World& world,
                                         const Backends& backends) {
  if (!cfg.preflight_topology) {
    TopologyPreflight off;
    off.measured = false;
    for (const std::string& host : world.hosts) off.nodes.push_back({{"host", host}});
    return off;
  }
  // Every rank's GPUs: under per-task binding the host's first rank sees only its own.
  const std::vector<std::string> seen = gather_strings_on_host(
      world,
      backends.gpu ? dump_escaped(gpu_inventory(backends.gpu->inventory(), world.host)) : "[]");
  NodeTopology mine;
  if (world.index_on_host() == 0) {
    std::vector<json> views;
    for (const std::string& s : seen) views.push_back(json::parse(s));
    const bool fixture = cfg.test.sysfs_root_rank == world.rank && !cfg.test.sysfs_root.empty();
    mine = read_node_topology(world.host, fixture ? cfg.test.sysfs_root : "/sys");
    add_stack(mine, backends, merge_gpu_inventories(views));
  }
  TopologyPreflight preflight = gather_topology(world, mine);
  if (world.rank == 0)
    for (const auto& [host, reasons] : preflight.judgement.reasons)
      for (const std::string& why : reasons) spdlog::warn("{}: {}", host, why);
  return preflight;
}

}  // namespace tp
