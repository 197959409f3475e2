#include "app/stages/run_facts.h"

#include <map>

#include "app/report/context.h"
#include "app/report/report_text.h"
#include "app/stages/comm_times.h"
#include "common/sysinfo.h"
#include "fabric/rank_nic.h"
#include "mpi/check.h"
#include "mpi/gather.h"

namespace tp {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RankInfo, rank, host, local_rank, device, cpu_affinity,
                                   numa_nodes, cpu_model, gemm_rate_flops, gpu_uuid, gpu_pci_bus_id,
                                   gpu_numa_node, cuda_visible_devices, nic, nic_source,
                                   nic_numa_node)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RankLoad, bytes_read, samples_read, reader_busy_s, window_s,
                                   host_ram_bytes, shards_read)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RankFacts, info, digest, load)

namespace {

RankLoad load_of(const DatasetBatchSource* loader, const World& world) {
  RankLoad load;
  if (!loader) return load;
  const LoaderStats stats = loader->stats();
  load.bytes_read = stats.bytes_read;
  load.samples_read = stats.samples_read;
  load.reader_busy_s = stats.reader_busy_s;
  load.window_s = stats.last_read_s - stats.first_read_s;
  // Each host's RAM once, for the 5x rule.
  if (world.local_rank == 0) load.host_ram_bytes = meminfo_bytes("MemTotal").value_or(0);
  for (int f : stats.shards_read) {
    if (!load.shards_read.empty()) load.shards_read += ',';
    load.shards_read += std::to_string(f);
  }
  return load;
}

// Every rank runs the same steps with the same buckets, so the tables line up element by element.
std::vector<std::vector<double>> min_over_ranks(const World& world,
                                                const std::vector<std::vector<double>>& table) {
  std::vector<double> flat, mins;
  for (const auto& row : table) flat.insert(flat.end(), row.begin(), row.end());
  mins.resize(flat.size());
  mpiCheck(
      MPI_Reduce(flat.data(), mins.data(), int(flat.size()), MPI_DOUBLE, MPI_MIN, 0, world.comm));
  if (world.rank != 0) return {};
  std::vector<std::vector<double>> out;
  size_t at = 0;
  for (const auto& row : table) {
    out.emplace_back(mins.begin() + long(at), mins.begin() + long(at + row.size()));
    at += row.size();
  }
  return out;
}

}  // namespace

HostGpuFacts gather_gpu_facts(const World& world, const Backends& backends) {
  // Every rank's view (under per-task binding each sees only its own GPU); the warnings once per
  // machine.
  nlohmann::json mine = nlohmann::json::object();
  if (backends.gpu) {
    mine["gpus"] = gpu_inventory(backends.gpu->inventory(), world.host);
    if (world.local_rank == 0)
      mine["warnings"] = gpu_clock_warnings(gpu_clock_query_output(), world.host);
  }
  const std::vector<std::string> all = gather_strings_at_root(world, dump_escaped(mine));
  HostGpuFacts facts;
  if (all.empty()) return facts;
  std::map<std::string, std::vector<nlohmann::json>> seen_on_host;
  for (size_t r = 0; r < all.size(); ++r) {
    const nlohmann::json parsed = nlohmann::json::parse(all[r]);
    if (parsed.contains("gpus")) seen_on_host[world.host_of_rank[r]].push_back(parsed["gpus"]);
    for (const auto& w : parsed.value("warnings", nlohmann::json::array()))
      facts.warnings.push_back(w);
  }
  for (const std::string& host : world.hosts)
    for (const auto& g : merge_gpu_inventories(seen_on_host[host])) facts.gpus.push_back(g);
  return facts;
}

RunFacts gather_run_facts(const World& world, const Backends& backends, const TrainResult& result,
                          double gemm_rate, const DatasetBatchSource* loader) {
  RankFacts mine;
  mine.info.rank = world.rank;
  mine.info.host = world.host;
  mine.info.local_rank = world.local_rank;
  mine.info.device = backends.compute->device();
  mine.info.cpu_affinity = cpu_affinity_list();
  mine.info.numa_nodes = numa_nodes_of(cpu_affinity());
  mine.info.cpu_model = cpu_model();
  mine.info.gemm_rate_flops = gemm_rate;
  if (backends.placement) {
    mine.info.gpu_uuid = backends.placement->uuid;
    mine.info.gpu_pci_bus_id = backends.placement->pci_bus_id;
    mine.info.gpu_numa_node = backends.placement->numa_node;
    mine.info.cuda_visible_devices = backends.placement->cuda_visible_devices;
  }
  const int near =
      mine.info.gpu_numa_node >= 0 ? mine.info.gpu_numa_node : numa_node_of_this_process("/sys");
  const RankNic nic = rank_nic("/sys", world.index_on_host(), near,
                               backends.comm && backends.comm->name() == "nccl",
                               transport_settings_from_environment());
  mine.info.nic = nic.name;
  mine.info.nic_source = nic.source;
  mine.info.nic_numa_node = nic.numa_node;
  mine.digest = result.digest.hex();
  mine.load = load_of(loader, world);
  RunFacts facts;
  facts.ranks = gather_records_at_root(world, mine);
  // Timings stay numbers: a long run has many steps per rank.
  const size_t steps = result.measured.size();
  const std::vector<double> all = gather_at_root(world, flatten(result.measured));
  for (size_t r = 0; r < facts.ranks.size(); ++r)
    facts.timings.push_back(unflatten(&all[r * steps * kStepTimingFields], steps));
  facts.bucket_seconds = min_over_ranks(world, result.bucket_seconds);
  facts.gpus = gather_gpu_facts(world, backends);
  facts.communicators = gather_comm_times(world, backends.comm ? backends.comm->name() : "");
  return facts;
}

}  // namespace tp
