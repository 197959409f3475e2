#include "app/accept/accept_health.h"

#include "app/report/gate.h"
#include "fabric/rank_nic.h"
#include "gpu/nccl_version.h"
#include "gpu/nvml.h"
#include "mpi/gather.h"
#include "node/health_change.h"
#include "node/kernel_log.h"
#include "node/load_health.h"

namespace tp {
namespace {

using nlohmann::json;

std::string worst_status(const std::vector<HealthFinding>& findings) {
  std::string status = "pass";
  for (const HealthFinding& f : findings)
    if (f.status == "fail")
      return "fail";
    else if (f.status == "warn")
      status = "warn";
  return status;
}

HealthStage gathered(const std::string& name, const NodeHealthRecord& mine, const World& world,
                     const std::string& healthy) {
  const std::vector<NodeHealthRecord> all = gather_records_at_root(world, mine);
  return world.rank == 0 ? judge_node_health(name, all, healthy) : HealthStage{};
}

}  // namespace

void to_json(json& j, const NodeHealthRecord& r) {
  json findings = json::array();
  for (const HealthFinding& f : r.findings) findings.push_back({f.status, f.reason, f.action});
  j = {{"host", r.host}, {"judged", r.judged}, {"why_not", r.why_not}, {"findings", findings}};
}

void from_json(const json& j, NodeHealthRecord& r) {
  r.host = j.at("host").get<std::string>();
  r.judged = j.at("judged").get<bool>();
  r.why_not = j.at("why_not").get<std::string>();
  for (const json& f : j.at("findings")) r.findings.push_back({f[0], f[1], f[2]});
}

NodeRead read_this_node(const TestHooks& test, const World& world, bool after_load) {
  NodeRead read;
  if (world.index_on_host() != 0) return read;
  read.taken = true;
  if (test.sysfs_root_rank == world.rank && !test.sysfs_root.empty())
    read.roots.sysfs =
        after_load && !test.sysfs_root_after.empty() ? test.sysfs_root_after : test.sysfs_root;
  read.machine = read_machine_facts(read.roots);
  read.machine.host = world.host_of_rank[size_t(world.rank)];  // test.split_hosts included
  read.driver = read_nvml();
  read.driver.nccl_version = nccl_library_version(read.driver.nccl_unavailable);
  return read;
}

HealthStage judge_node_health(const std::string& name, const std::vector<NodeHealthRecord>& all,
                              const std::string& healthy) {
  HealthStage stage;
  int nodes = 0, judged = 0, flagged = 0;
  std::string status = "pass", first, why_not;
  for (const NodeHealthRecord& r : all) {
    if (r.host.empty()) continue;  // not a node's first rank
    ++nodes;
    if (!r.judged) {
      if (why_not.empty()) why_not = r.host + ": " + r.why_not;
      continue;
    }
    ++judged;
    flagged += !r.findings.empty();
    const std::string worst = worst_status(r.findings);
    if (worst == "fail" || (worst == "warn" && status == "pass")) status = worst;
    for (const HealthFinding& f : r.findings) {
      if (first.empty()) first = f.reason;
      json finding = node_finding(name, f.reason, f.status);
      finding["action"] = f.action;
      stage.findings.emplace_back(r.host, std::move(finding));
    }
  }
  const std::string of = std::to_string(judged) + " of " + std::to_string(nodes) + " node(s)";
  if (judged == 0)
    stage.check = gate_check(name, nullptr, nullptr, "n/a",
                             "nothing to judge on any node; first: " + why_not);
  else if (flagged == 0)
    stage.check = gate_check(name, 0, 0, "pass", healthy + " on " + of);
  else
    stage.check =
        gate_check(name, flagged, 0, status,
                   std::to_string(stage.findings.size()) + " finding(s) on " +
                       std::to_string(flagged) + " node(s) (" + of + " judged); first: " + first);
  if (judged > 0 && judged < nodes && stage.check["status"] != "n/a")
    stage.check["reason"] =
        stage.check["reason"].get<std::string>() + " (not judged: " + why_not + ")";
  return stage;
}

HealthStage gpu_health_stage(const NodeRead& read, const World& world) {
  NodeHealthRecord mine;
  if (read.taken) {
    mine.host = read.machine.host;
    mine.judged = read.driver.loaded && !read.driver.gpus.empty();
    mine.why_not = !read.driver.loaded
                       ? "the GPU driver could not be asked (" + read.driver.unavailable + ")"
                       : "the driver lists no GPU";
    if (mine.judged) mine.findings = judge_gpu_health(mine.host, read.driver);
  }
  return gathered("gpu_health", mine, world, "every GPU healthy at rest");
}

std::vector<std::string> rail_nics_on_node(const TestHooks& test, const World& world, bool nccl) {
  // The fixture tree of test.sysfs_root_rank's node is every rank of that node's /sys.
  std::string root = "/sys";
  if (!test.sysfs_root.empty() && test.sysfs_root_rank >= 0 &&
      test.sysfs_root_rank < int(world.host_of_rank.size()) &&
      world.host_of_rank[size_t(test.sysfs_root_rank)] == world.host_of_rank[size_t(world.rank)])
    root = test.sysfs_root;
  const RankNic nic = rank_nic(root, world.index_on_host(), numa_node_of_this_process(root), nccl,
                               transport_settings_from_environment());
  return gather_strings_on_host(world, nic.name);
}

void add_stage_change(NodeChanges& changes, NodeRead now, const std::vector<std::string>& rail_nics,
                      const std::string& stage) {
  const NodeRead& before = changes.last;
  if (before.taken && now.taken) {
    const std::string& host = now.machine.host;
    const bool gpus = before.driver.loaded && now.driver.loaded && !before.driver.gpus.empty();
    changes.judged = changes.judged || gpus || !before.machine.rdma_ports.empty();
    const std::string during = "during the " + stage + " stage";
    for (HealthFinding& f : judge_gpu_change(host, before.driver, now.driver, during))
      changes.findings.push_back(std::move(f));
    for (HealthFinding& f : judge_port_change(host, before.machine.rdma_ports,
                                              now.machine.rdma_ports, rail_nics, during))
      changes.findings.push_back(std::move(f));
  }
  changes.last = std::move(now);
}

HealthStage health_change_stage(const NodeChanges& changes, const World& world) {
  NodeHealthRecord mine;
  if (changes.last.taken) {
    mine.host = changes.last.machine.host;
    mine.judged = changes.judged;
    mine.why_not = "no GPU the driver lists and no RDMA port";
    mine.findings = changes.findings;
  }
  return gathered(
      "health_change", mine, world,
      "no GPU or RDMA port counter rose between the preflight and the last stage's end");
}

NodeWatch start_node_watch(const NodeRead& read, double interval_s) {
  NodeWatch w;
  w.started = std::chrono::steady_clock::now();
  if (read.taken && read.driver.loaded && !read.driver.gpus.empty())
    w.watch = std::make_unique<NvmlWatch>(interval_s);
  return w;
}

LoadStages load_health_stages(NodeWatch& watch, const NodeRead& after, const InventorySpec& spec,
                              const World& world) {
  NodeHealthRecord load, xids;
  if (watch.watch && after.taken) {
    // A read of every GPU takes milliseconds: a watch not back in 10 s is stuck in the driver.
    const LoadHealth summary = summarise_load(watch.watch->stop(10), false);
    watch.watch.reset();
    const LoadRules rules = load_rules_of(&spec);
    load.host = xids.host = after.machine.host;
    load.judged = summary.unavailable.empty();
    load.why_not = "the GPUs were not watched (" + summary.unavailable + ")";
    load.findings = judge_load_health(load.host, summary, rules);
    const double since_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - watch.started).count();
    const KernelLog log = read_kernel_log();
    std::vector<XidEvent> seen = summary.xids;
    for (XidEvent& x : kernel_log_xids(log.records, log.now_us, since_s + 1))
      seen.push_back(std::move(x));
    const bool events_watched =
        summary.unavailable.empty() && summary.stopped && summary.events_unavailable.empty();
    xids.judged = events_watched || log.unreadable.empty();
    xids.why_not = "neither NVML's XID events (" +
                   (!summary.unavailable.empty() ? summary.unavailable
                    : !summary.stopped           ? "the watch is stuck in the driver"
                                                 : summary.events_unavailable) +
                   ") nor the kernel log (" + log.unreadable + ") could be read";
    xids.findings = judge_xids(xids.host, seen, rules.xids, after.driver);
  } else if (after.taken) {
    load.host = xids.host = after.machine.host;
    load.why_not = xids.why_not = !after.driver.loaded ? "the GPU driver could not be asked (" +
                                                             after.driver.unavailable + ")"
                                                       : "the driver lists no GPU";
  }
  LoadStages stages;
  stages.load_health =
      gathered("load_health", load, world,
               "no GPU held down by hardware or below its PCIe link while busy during the stages");
  stages.xid = gathered("xid", xids, world, "no XID during the stages");
  return stages;
}

}  // namespace tp
