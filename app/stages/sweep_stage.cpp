// The sweep stage: one rank of a fabric sweep, as a sequence of named steps (docs/sweep.md).
#include "app/stages/sweep_stage.h"

#include <mpi.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>
#include <limits>

#include <unistd.h>

#include "app/report/context.h"
#include "app/report/report_text.h"
#include "app/report/sweep_summary.h"
#include "app/stages/backend_selection.h"
#include "app/stages/comm_times.h"
#include "app/stages/run_facts.h"
#include "app/stages/stage_watch.h"
#include "app/stages/sweep_pairwise.h"
#include "app/stages/sweep_report.h"
#include "app/stages/topology_facts.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/log.h"
#include "common/sysinfo.h"
#include "fabric/sweep_data.h"
#include "mpi/check.h"
#include "mpi/gather.h"
#include "train/preemption.h"

namespace tp {
namespace {

using nlohmann::json;

// The ranks this rank sweeps among (sweep.split), with the communicators that reach them.
struct GroupSetup {
  std::unique_ptr<Collective> split;  // null when the group is the world
  MPI_Comm comm = MPI_COMM_NULL;      // owned when `split` is set
  std::string name;
  std::vector<int> world_ranks;
  Collective& collective(Collective& world_collective) const {
    return split ? *split : world_collective;
  }
};

GroupSetup make_group(const std::string& split, const World& world, Collective& all) {
  GroupSetup g;
  if (split == "none") {
    g.comm = world.comm;
    g.name = "world";
    for (int r = 0; r < world.size; ++r) g.world_ranks.push_back(r);
    return g;
  }
  const int node =
      int(std::find(world.hosts.begin(), world.hosts.end(), world.host) - world.hosts.begin());
  const int rail = world.index_on_host();
  const int color = split == "node" ? node : rail;
  g.name = split == "node" ? "node " + world.host : "rail " + std::to_string(rail);
  g.split = all.split(color, world.rank);
  mpiCheck(MPI_Comm_split(world.comm, color, world.rank, &g.comm));
  int size = 0;
  MPI_Comm_size(g.comm, &size);
  g.world_ranks.resize(size_t(size));
  mpiCheck(MPI_Allgather(&world.rank, 1, MPI_INT, g.world_ranks.data(), 1, MPI_INT, g.comm));
  return g;
}

// A dtype the backend lacks is a usage error, found before anything is timed.
void check_backend_runs(const SweepConfig& cfg, const World& world, const Collective& comm) {
  agree_or_throw<UsageError>(
      world, sweep_backend_problem(cfg, world.size, comm.name(), [&](CollectiveOp op) {
        return comm.cannot_run(op, cfg.plan.type, false);
      }));
}

// Rank 0 prints as the sweep goes: the table itself for one group, as nccl-tests does; a line
// per operation when the groups run side by side (their tables follow in the summary).
class LivePrinter {
 public:
  LivePrinter(const World& world, const GroupSetup& group, bool whole_table, const json& devices)
      : on_(world.rank == 0), whole_table_(whole_table), group_(group), devices_(devices) {}
  void operator()(const SweepRow& row) {
    if (!on_) return;
    const json j = sweep_row_json(row, group_.name);
    if (j["op"] != op_) {
      end_op();
      op_ = j["op"];
      if (whole_table_)
        std::cout << sweep_table_header(op_, group_.name, group_.world_ranks, devices_, 0);
    }
    op_rows_.push_back(j);
    if (!row.in_place) {
      pending_ = j;
    } else if (whole_table_) {
      std::cout << sweep_table_line(pending_, j) << std::flush;
    }
  }
  // After an operation's last row: nccl-tests' closing lines under its table, or a line saying
  // it is done when groups run side by side.
  void end_op() {
    if (!on_ || op_.empty()) return;
    if (whole_table_)
      std::cout << sweep_op_closing_lines(op_rows_) << std::flush;
    else
      std::cout << "sweep: " << op_ << " done (" << group_.name << ")\n" << std::flush;
    op_rows_.clear();
    op_.clear();
  }

 private:
  bool on_, whole_table_;
  const GroupSetup& group_;
  const json& devices_;
  std::string op_;
  std::vector<json> op_rows_;
  json pending_;
};

// Every group's rows at rank 0: each group's first rank sends them (every rank of a group holds
// the same rows: times and counts were reduced over the group).
std::vector<SweepGroupRecord> gather_groups(const World& world, const GroupSetup& group,
                                            Collective& collective,
                                            const std::vector<SweepRow>& rows) {
  json mine;  // null: this rank does not speak for its group
  if (collective.group_rank() == 0) {
    json rows_json = json::array();
    for (const SweepRow& row : rows) rows_json.push_back(sweep_row_json(row, group.name));
    mine = {{"name", group.name}, {"world_ranks", group.world_ranks}, {"rows", rows_json}};
  }
  std::vector<SweepGroupRecord> groups;
  for (const json& j : gather_records_at_root(world, mine)) {
    if (j.is_null()) continue;
    SweepGroupRecord g{j.at("name"), j.at("world_ranks"), {}};
    for (const json& row : j.at("rows")) g.rows.push_back(sweep_row_from_json(row));
    groups.push_back(std::move(g));
  }
  return groups;
}

// Each rank's process and device, at rank 0, for the "# Using devices" lines nccl-tests prints
// above its tables: its pid and, on a GPU, the GPU's index, PCI address and name (from the GPU
// facts, by UUID); device -1 and "cpu" on the CPU backend.
json gather_devices(const World& world, const Backends& backends, const HostGpuFacts& gpus) {
  const json mine = {{"pid", int(::getpid())},
                     {"uuid", backends.placement ? backends.placement->uuid : ""},
                     {"pci_bus_id", backends.placement ? backends.placement->pci_bus_id : ""}};
  json devices = json::array();
  const std::vector<json> all = gather_records_at_root(world, mine);
  for (size_t r = 0; r < all.size(); ++r) {
    json device = {
        {"rank", r},    {"host", world.host_of_rank[r]},         {"pid", all[r].at("pid")},
        {"device", -1}, {"pci_bus_id", all[r].at("pci_bus_id")}, {"name", "cpu"}};
    const std::string uuid = all[r].at("uuid");
    for (const json& g : gpus.gpus)
      if (!uuid.empty() && g.value("uuid", "") == uuid) {
        device["device"] = g.value("index", -1);
        device["name"] = g.value("name", "");
      }
    devices.push_back(std::move(device));
  }
  return devices;
}

std::vector<SweepGroupRecord> run_collectives(const SweepConfig& cfg, const World& world,
                                              Collective& all, RunTrace& trace,
                                              const json& devices) {
  GroupSetup group = make_group(cfg.split, world, all);
  Collective& collective = group.collective(all);
  SweepPlan plan = cfg.plan;
  // The switch names a world rank; the runner perturbs a group rank.
  const auto corrupt =
      std::find(group.world_ranks.begin(), group.world_ranks.end(), cfg.plan.corrupt_rank);
  plan.corrupt_rank =
      corrupt == group.world_ranks.end() ? -1 : int(corrupt - group.world_ranks.begin());
  LivePrinter live(world, group, cfg.split == "none", devices);
  const SweepGroup sweep_group{collective, group.comm, group.world_ranks};
  // A stop point after every row when one group spans the world: groups side by side would stop
  // at different rows, so a split sweep stops only at the end of its stage.
  int64_t rows_done = 0;
  const auto on_row = [&](const SweepRow& row) {
    live(row);
    stage_beat(++rows_done);
    if (!group.split) stop_point(world.comm);
  };
  const std::vector<SweepRow> rows = run_sweep(sweep_group, plan, on_row);
  trace.has_sweep = true;
  trace.sweep_rows = rows;
  live.end_op();
  auto groups = gather_groups(world, group, collective, rows);
  if (group.split) MPI_Comm_free(&group.comm);
  return groups;
}

json sweep_context(const Invocation& inv, const TrainConfig& train, const World& world,
                   const std::string& start_time, const Backends& backends,
                   const HostGpuFacts& gpus, int iters, const json& nodes) {
  const ContextInputs in{inv,
                         train,
                         world,
                         start_time,
                         {backends.compute->name(), backends.comm->name(), backends.notes,
                          backends.gpu, backends.gpu_sharers},
                         gpus.gpus,
                         gpus.warnings,
                         iters,
                         std::nullopt,
                         nodes,
                         {}};
  return build_context(in);
}

std::optional<uint64_t> host_memory_available(const TrainConfig& train) {
  return train.test.host_memory_bytes > 0 ? std::optional<uint64_t>(train.test.host_memory_bytes)
                                          : meminfo_bytes("MemAvailable");
}

// sweep.max_bytes=0: the largest size for this world (at least gate.busbw_bytes), halved until
// every host's ranks fit, agreed on the smallest any host allows.
SweepConfig resolve_sizes(SweepConfig cfg, const TrainConfig& train, const World& world,
                          const Collective& comm, uint64_t busbw_bytes) {
  if (!cfg.auto_max_bytes) return cfg;
  const uint64_t wanted = auto_sweep_max_bytes(world.size, busbw_bytes);
  const std::optional<uint64_t> available = host_memory_available(train);
  uint64_t mine = available
                      ? fit_sweep_max_bytes(wanted, cfg.plan.min_bytes, cfg.plan.type,
                                            comm.name() != "nccl", world.local_size, *available)
                      : wanted;
  if (mine == 0) mine = std::max<uint64_t>(cfg.plan.min_bytes, 1);  // the memory check names it
  uint64_t agreed = 0;
  mpiCheck(MPI_Allreduce(&mine, &agreed, 1, MPI_UINT64_T, MPI_MIN, world.comm));
  cfg.plan.max_bytes = std::max(agreed, cfg.plan.min_bytes);
  cfg.sizes_note =
      "sweep.max_bytes=0: " + std::to_string(wanted) + " bytes for " + std::to_string(world.size) +
      " ranks" +
      (wanted > auto_sweep_max_bytes(world.size, 0) ? ", raised to gate.busbw_bytes" : "") +
      (cfg.plan.max_bytes < wanted ? ", halved to " + std::to_string(cfg.plan.max_bytes) +
                                         " to fit the host memory of every node"
                                   : std::string());
  return cfg;
}

// The whole matrices go to the trace (rank 0's record; the others make the same datasets): the
// report keeps them only for small rails.
void add_pairwise_trace(RunTrace& trace, const PairwiseRecord& record) {
  trace.has_pairwise = true;
  const auto flat = [](const PairMatrix& m) {
    std::vector<double> out;
    for (const auto& row : m)
      for (double v : row) out.push_back(v < 0 ? std::numeric_limits<double>::quiet_NaN() : v);
    return out;
  };
  for (const PairwiseRail& rail : record.rails)
    trace.pairwise.push_back(
        {rail.rail, uint64_t(rail.hosts.size()), flat(rail.one_way), flat(rail.both_ways)});
}

// The largest row must fit in this host's memory with every rank of the host holding its own, as
// train checks its model (90% of MemAvailable usable); found before the first row.
void check_sweep_memory(const SweepConfig& cfg, const TrainConfig& train, const World& world,
                        const Collective& comm) {
  if (cfg.mode != "collectives") return;
  const uint64_t per_rank =
      sweep_host_bytes(cfg.plan.max_bytes, cfg.plan.type, comm.name() != "nccl");
  const std::optional<uint64_t> available = host_memory_available(train);
  const uint64_t needed = per_rank * uint64_t(world.local_size);
  std::string problem;
  if (available && double(needed) > 0.9 * double(*available))
    problem = "sweep.max_bytes=" + std::to_string(cfg.plan.max_bytes) + " needs " +
              std::to_string(per_rank) +
              " bytes of host memory per rank (the buffers, the input, " +
              "the result and the expected result; docs/sweep.md, \"Memory\"); " +
              std::to_string(world.local_size) + " ranks on host " + world.host + " need " +
              std::to_string(needed) + " bytes, " + std::to_string(*available) +
              " available, 90% of it usable";
  agree_or_throw<UsageError>(world, problem);
}

}  // namespace

std::string sweep_backend_problem(const SweepConfig& cfg, int world_size,
                                  const std::string& comm_name,
                                  const std::function<std::string(CollectiveOp)>& cannot_run) {
  for (CollectiveOp op : cfg.plan.ops) {
    const std::string why = cannot_run(op);
    if (!why.empty())
      return "sweep.dtype=" + sweep_type_name(cfg.plan.type) + " with comm.backend=" + comm_name +
             ": " + why;
  }
  if (world_size > most_exact_ranks(cfg.plan.type))
    return "sweep.dtype=" + sweep_type_name(cfg.plan.type) + " cannot hold a sum over " +
           std::to_string(world_size) + " ranks exactly (at most " +
           std::to_string(most_exact_ranks(cfg.plan.type)) +
           "), so its results could not be checked; use float32";
  return "";
}

json sweep_stage(const Invocation& inv, const SweepConfig& given, const TrainConfig& train,
                 const World& world, RunTrace& trace) {
  const std::string start_time = utc_timestamp();
  StageWatch watch(train, inv.options["report"].as<std::string>(), world,
                   given.mode == "pairwise" ? "pairwise" : "sweep");
  Backends backends = select_backends(train, world, nullptr);
  const uint64_t busbw_bytes = inv.options.count("gate.busbw_bytes")
                                   ? uint64_t(inv.options["gate.busbw_bytes"].as<int64_t>())
                                   : 0;
  const SweepConfig cfg = resolve_sizes(given, train, world, *backends.comm, busbw_bytes);
  check_backend_runs(cfg, world, *backends.comm);
  check_sweep_memory(cfg, train, world, *backends.comm);
  const TopologyPreflight topology = run_topology_preflight(train, world, backends);
  if (world.rank == 0 && cfg.mode == "collectives")
    spdlog::info("sweep: {} ranks on {} hosts, comm {}, {}, {} to {} bytes, split {}", world.size,
                 world.hosts.size(), backends.comm->name(), sweep_type_name(cfg.plan.type),
                 cfg.plan.min_bytes, cfg.plan.max_bytes, cfg.split);
  if (world.rank == 0 && cfg.mode == "pairwise")
    spdlog::info("sweep: pairwise over {} hosts ({} ranks), comm {}", world.hosts.size(),
                 world.size, backends.comm->name());
  SweepRecord record;
  record.config = cfg;
  record.backend = backends.comm->name();
  record.host_of_rank = world.host_of_rank;
  record.hosts = world.hosts;
  record.topology_reasons = topology.judgement.reasons;
  record.topology_measured = topology.measured;
  // Before the sweep: the tables it prints as it goes name every rank's device.
  const HostGpuFacts gpus = gather_gpu_facts(world, backends);
  record.devices = gather_devices(world, backends, gpus);
  if (cfg.mode == "pairwise") {
    record.pairwise =
        run_pairwise(cfg, world, *backends.comm,
                     train.test.sysfs_root_rank == world.rank && !train.test.sysfs_root.empty()
                         ? train.test.sysfs_root
                         : "/sys",
                     backends.placement ? backends.placement->numa_node : -1);
    add_pairwise_trace(trace, *record.pairwise);
  } else
    record.groups = run_collectives(cfg, world, *backends.comm, trace, record.devices);
  json communicators = gather_comm_times(world, backends.comm->name());
  if (world.rank == 0) {
    // The context's few-samples warning speaks of training steps; the sweep report words its
    // own (app/stages/sweep_report.cpp).
    record.context = sweep_context(inv, train, world, start_time, backends, gpus,
                                   kEnoughTimedIterations, topology.nodes);
    record.context["communicators"] = std::move(communicators);
  }
  watch.end();
  return world.rank == 0 ? build_sweep_report(record) : json();
}

}  // namespace tp
