#include "app/stages/sweep_report.h"

#include <algorithm>
#include <map>

#include "app/report/gate.h"
#include "app/stages/sweep_pairwise_report.h"
#include "common/dtype_names.h"
#include "fabric/sweep_data.h"

namespace tp {
namespace {

using nlohmann::json;

constexpr uint64_t kLargeRowBytes = 1 << 20;  // nccl-tests' large-message regime starts about here

ElementType type_named(const std::string& name) {
  for (ElementType t : {ElementType::f32, ElementType::i32, ElementType::bf16, ElementType::f16})
    if (sweep_type_name(t) == dtype_name(name)) return t;
  throw std::invalid_argument("unknown element type '" + name + "'");
}

bool is_reduction(CollectiveOp op) {
  return op == CollectiveOp::allreduce || op == CollectiveOp::reducescatter;
}

json number_or_null(const std::optional<double>& value) {
  return value ? json(*value) : json(nullptr);
}

json group_json(const SweepGroupRecord& g, const SweepRecord& record) {
  json hosts = json::array();
  for (int r : g.world_ranks) {
    const std::string& h = record.host_of_rank.at(size_t(r));
    if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
  }
  uint64_t wrong = 0;
  for (const SweepRow& row : g.rows) wrong += row.wrong;
  return {{"name", g.name},
          {"ranks", g.world_ranks.size()},
          {"world_ranks", g.world_ranks},
          {"hosts", hosts},
          {"avg_busbw_gbps", number_or_null(average_busbw(g.rows))},
          {"avg_busbw_gbps_1mib", number_or_null(average_busbw(g.rows, kLargeRowBytes))},
          {"wrong", wrong}};
}

// The group with the lowest busbw over sizes of 1 MiB and more (over every size when the sweep
// stopped below 1 MiB); "" with one group, or when no group measured anything. A group that
// measured nothing is never the slowest.
std::string slowest_group(const json& groups) {
  if (groups.size() < 2) return "";
  bool large = false;
  for (const json& g : groups) large = large || g.at("avg_busbw_gbps_1mib").is_number();
  const char* key = large ? "avg_busbw_gbps_1mib" : "avg_busbw_gbps";
  const json* slowest = nullptr;
  for (const json& g : groups)
    if (g.at(key).is_number() &&
        (!slowest || g.at(key).get<double>() < slowest->at(key).get<double>()))
      slowest = &g;
  return slowest ? slowest->at("name").get<std::string>() : "";
}

struct WrongSummary {
  uint64_t total = 0;
  std::string first;  // "allreduce 1024 B in place (node a): 3 wrong, first on rank 1 (host h)"
};

WrongSummary wrong_summary(const SweepRecord& record) {
  WrongSummary w;
  for (const SweepGroupRecord& g : record.groups)
    for (const SweepRow& row : g.rows) {
      w.total += row.wrong;
      if (row.wrong == 0 || !w.first.empty()) continue;
      const int rank = row.first_wrong_rank;
      w.first = sweep_op_name(row.op) + " " + std::to_string(row.bytes) + " B " +
                (row.in_place ? "in place" : "out of place") + " (" + g.name +
                "): " + std::to_string(row.wrong) + " wrong element(s), the first on rank " +
                std::to_string(rank) + " (host " + record.host_of_rank.at(size_t(rank)) + ")";
    }
  return w;
}

size_t rows_run(const SweepRecord& record) {
  size_t n = 0;
  for (const SweepGroupRecord& g : record.groups)
    for (const SweepRow& row : g.rows) n += row.not_run.empty() ? 1 : 0;
  return n;
}

json checks_of(const SweepRecord& record, const WrongSummary& wrong) {
  json checks = json::array({topology_check(record.topology_reasons, record.topology_measured)});
  if (record.pairwise) {
    for (const json& c : pairwise_checks(*record.pairwise)) checks.push_back(c);
    return checks;
  }
  const size_t ran = rows_run(record);
  if (ran == 0)
    checks.push_back(
        gate_check("sweep_correctness", nullptr, 0, "n/a", "no row ran: no element was checked"));
  else
    checks.push_back(
        gate_check("sweep_correctness", wrong.total, 0, wrong.total == 0 ? "pass" : "fail",
                   wrong.total == 0 ? "every element of every row was right" : wrong.first));
  checks.push_back(gate_check("sweep_rows", ran, 1, ran > 0 ? "pass" : "warn",
                              ran > 0 ? std::to_string(ran) + " rows measured"
                                      : "no row could run on this backend: nothing was measured"));
  return checks;
}

json nodes_json(const SweepRecord& record) {
  std::map<std::string, std::vector<json>> findings;
  for (const auto& [host, reasons] : record.topology_reasons)
    for (const std::string& why : reasons) findings[host].push_back(node_finding("topology", why));
  if (record.pairwise)
    for (const auto& [host, found] : pairwise_node_findings(*record.pairwise))
      findings[host].insert(findings[host].end(), found.begin(), found.end());
  json nodes = json::array();
  for (const std::string& host : record.hosts) {
    json ranks = json::array();
    for (size_t r = 0; r < record.host_of_rank.size(); ++r)
      if (record.host_of_rank[r] == host) ranks.push_back(r);
    const auto mine = findings.find(host);
    const bool flagged = mine != findings.end();
    json reasons = json::array();
    if (flagged)
      for (const json& found : mine->second) reasons.push_back(found.at("reason"));
    nodes.push_back({{"host", host},
                     {"ranks", ranks},
                     {"flagged", flagged},
                     {"reasons", reasons},
                     {"findings", flagged ? json(mine->second) : json::array()}});
  }
  return nodes;
}

json settings_json(const SweepRecord& record) {
  const SweepConfig& c = record.config;
  json ops = json::array();
  for (CollectiveOp op : c.plan.ops) ops.push_back(sweep_op_name(op));
  return {{"mode", c.mode},
          {"backend", record.backend},
          {"ops", ops},
          {"dtype", sweep_type_name(c.plan.type)},
          {"min_bytes", c.plan.min_bytes},
          {"max_bytes", c.plan.max_bytes},
          // How sweep.max_bytes=0 chose max_bytes; null where it was given.
          {"max_bytes_rule", c.sizes_note.empty() ? json() : json(c.sizes_note)},
          {"factor", c.plan.factor},
          {"iters", c.plan.iters},
          {"warmup", c.plan.warmup},
          {"split", c.split}};
}

}  // namespace

json sweep_row_json(const SweepRow& row, const std::string& group) {
  return {{"group", group},
          {"op", sweep_op_name(row.op)},
          {"dtype", sweep_type_name(row.type)},
          {"bytes", row.bytes},
          {"count", row.count},
          {"in_place", row.in_place},
          {"redop", is_reduction(row.op) ? "sum" : "none"},
          {"root", row.root},
          {"not_run", row.not_run},
          {"time_us", {{"mean", row.mean_us}, {"p50", row.p50_us}, {"p99", row.p99_us}}},
          {"algbw_gbps", row.algbw_gbps},
          {"busbw_gbps", row.busbw_gbps},
          {"wrong", row.wrong},
          {"first_wrong_rank", row.first_wrong_rank}};
}

SweepRow sweep_row_from_json(const json& j) {
  SweepRow row;
  row.op = parse_sweep_op(j.at("op")).value();
  row.type = type_named(j.at("dtype"));
  row.bytes = j.at("bytes");
  row.count = j.at("count");
  row.in_place = j.at("in_place");
  row.root = j.at("root");
  row.not_run = j.at("not_run");
  row.mean_us = j.at("time_us").at("mean");
  row.p50_us = j.at("time_us").at("p50");
  row.p99_us = j.at("time_us").at("p99");
  row.algbw_gbps = j.at("algbw_gbps");
  row.busbw_gbps = j.at("busbw_gbps");
  row.wrong = j.at("wrong");
  row.first_wrong_rank = j.at("first_wrong_rank");
  return row;
}

json build_sweep_report(const SweepRecord& record) {
  json sweep = settings_json(record);
  json results = json::array(), groups = json::array();
  for (const SweepGroupRecord& g : record.groups) {
    for (const SweepRow& row : g.rows) results.push_back(sweep_row_json(row, g.name));
    groups.push_back(group_json(g, record));
  }
  const WrongSummary wrong = wrong_summary(record);
  sweep["results"] = results;
  sweep["groups"] = groups;
  sweep["devices"] = record.devices;
  sweep["slowest_group"] = slowest_group(groups);
  sweep["wrong"] = wrong.total;
  sweep["first_wrong"] = wrong.first;
  const json checks = checks_of(record, wrong);
  json report;
  report["schema"] = kReportSchema;
  report["verdict"] = verdict_of_checks(checks);
  report["context"] = record.context;
  report["nodes"] = nodes_json(record);
  if (record.pairwise) {
    for (const char* key :
         {"results", "groups", "devices", "slowest_group", "wrong", "first_wrong"})
      sweep.erase(key);
    sweep["pairwise"] = pairwise_json(*record.pairwise);
  }
  const int iters = record.pairwise ? record.config.pair_iters : record.config.plan.iters;
  if (iters < kEnoughTimedIterations && record.context.contains("warnings"))
    report["context"]["warnings"].push_back(
        "only " + std::to_string(iters) + " timed iterations per " +
        (record.pairwise ? "pair and direction" : "row") + ": p50 and p99 rest on few samples");
  if (record.pairwise && record.context.contains("warnings"))
    for (const std::string& w : pairwise_warnings(*record.pairwise))
      report["context"]["warnings"].push_back(w);
  report["sweep"] = sweep;
  report["gate"] = {{"checks", checks}};
  return report;
}

}  // namespace tp
