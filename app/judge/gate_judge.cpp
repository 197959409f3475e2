#include "app/judge/gate_judge.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <limits>
#include <set>
#include <tuple>

#include "app/report/gate.h"
#include "common/number_text.h"

namespace tp {
namespace {

using nlohmann::json;

const json* find_path(const json& report, std::initializer_list<const char*> keys) {
  const json* at = &report;
  for (const char* key : keys) {
    if (!at->is_object()) return nullptr;
    const auto found = at->find(key);
    if (found == at->end() || found->is_null()) return nullptr;
    at = &*found;
  }
  return at;
}

std::optional<double> number_at(const json& report, std::initializer_list<const char*> keys) {
  const json* at = find_path(report, keys);
  return at && at->is_number() ? std::optional(at->get<double>()) : std::nullopt;
}

std::string bytes_text(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f", bytes);
  return text;
}

double median_busbw(const json& row);

// The in-place row of `op` that gate.busbw_bytes is judged at: gate.busbw_bytes is the smallest
// size that must reach the floor, so the best row at or above it (by its median busbw), else the
// largest the sweep ran. `rows_at_or_above` counts the rows it chose among.
const json* busbw_row(const json& results, const std::string& op, int64_t bytes,
                      int& rows_at_or_above) {
  const json* best = nullptr;
  rows_at_or_above = 0;
  for (const json& row : results) {
    if (row.value("op", "") != op || !row.value("in_place", false) ||
        row.value("group", "") != "world" || !row.value("not_run", std::string()).empty() ||
        !row.contains("busbw_gbps") || !row["busbw_gbps"].is_number() || !row.contains("bytes"))
      continue;
    const int64_t b = row["bytes"];
    rows_at_or_above += b >= bytes ? 1 : 0;
    if (!best) {
      best = &row;
      continue;
    }
    const int64_t have = (*best)["bytes"];
    const bool fits = b >= bytes, had_fit = have >= bytes;
    if ((fits && (!had_fit || median_busbw(row) > median_busbw(*best))) ||
        (!fits && !had_fit && b > have))
      best = &row;
  }
  return best;
}

// The row's bus bandwidth at its median iteration time. The row's busbw_gbps is nccl-tests' (its
// mean time), which one iteration that the OS preempted halves on a shared host; the gate judges
// the fabric, so it reads the median (docs/acceptance.md, "Checks"). Older rows without the
// times keep their mean figure.
double median_busbw(const json& row) {
  const double busbw = row["busbw_gbps"].get<double>();
  const json* mean = find_path(row, {"time_us", "mean"});
  const json* p50 = find_path(row, {"time_us", "p50"});
  if (!mean || !p50 || !mean->is_number() || !p50->is_number() || p50->get<double>() <= 0)
    return busbw;
  return busbw * mean->get<double>() / p50->get<double>();
}

json busbw_checks(const GateThreshold& t, const json& report, double margin, bool retried,
                  int64_t bytes) {
  json checks = json::array();
  const json* results = find_path(report, {"sweep", "results"});
  std::vector<std::string> ops;
  // The operations data-parallel training runs, whose bus bandwidths are comparable to one
  // threshold (nccl-tests' busbw); alltoall, broadcast and sendrecv are reported, not gated.
  static const std::set<std::string> gated = {"allreduce", "allgather", "reducescatter"};
  if (results)
    for (const json& row : *results)
      if (gated.count(row.value("op", "")) &&
          std::find(ops.begin(), ops.end(), row.value("op", "")) == ops.end())
        ops.push_back(row.value("op", ""));
  for (const std::string& op : ops) {
    Threshold named = t.threshold;
    named.check += "." + op;
    Measurement m{std::nullopt, "GB/s", "sweep " + op, "", "sweep", "", retried};
    int candidates = 0;
    if (const json* row = busbw_row(*results, op, bytes, candidates)) {
      m.value = median_busbw(*row);
      m.detail =
          "in-place busbw at " + bytes_text((*row)["bytes"].get<double>()) +
          " bytes, at the median iteration" +
          (candidates > 0
               ? ", the best of " + std::to_string(candidates) +
                     " row(s) at or above gate.busbw_bytes " + bytes_text(double(bytes))
               : ", the largest row: none reached gate.busbw_bytes " + bytes_text(double(bytes)));
    } else {
      m.why_not = "the sweep ran no in-place row of " + op;
    }
    checks.push_back(judge_threshold(named, m, margin));
  }
  if (checks.empty()) {
    Measurement m{std::nullopt, "GB/s", "", "", "sweep", "", retried};
    m.why_not = "the sweep measured no operation";
    checks.push_back(judge_threshold(t.threshold, m, margin));
  }
  return checks;
}

// A pair's confirmation in the report, when the pairwise pass measured it again one way.
const json* confirmation_of(const json& rail, const std::string& from, const std::string& to) {
  const auto found = rail.find("confirmations");
  if (found == rail.end() || !found->is_array()) return nullptr;
  for (const json& c : *found)
    if (c.value("kind", "") != "node" && !c.value("both_ways", true) &&
        c.value("from", json()) == from && c.value("to", json()) == to && c.contains("gbps") &&
        c["gbps"].is_number())
      return &c;
  return nullptr;
}

// The slowest pair of nodes of any rail, one direction at a time. A pair the pass measured again
// (docs/sweep.md, "Confirming a flag") counts by its confirmed figure with its noise in its
// favour: gate.min_pair_gbps fails a pair only below it by more than the measured spread.
// Every one-way pair of a rail the report holds: the whole matrix, or where a large rail's matrix
// is in the trace, its slowest pairs (app/stages/pair_matrix_json.h), which hold the slowest.
std::vector<std::tuple<std::string, std::string, double>> one_way_pairs(const json& rail) {
  std::vector<std::tuple<std::string, std::string, double>> pairs;
  const json& hosts = rail["hosts"];
  if (rail.contains("one_way_gbps") && rail["one_way_gbps"].is_array()) {
    const json& matrix = rail["one_way_gbps"];
    for (size_t a = 0; a < matrix.size() && a < hosts.size(); ++a)
      for (size_t b = 0; b < matrix[a].size() && b < hosts.size(); ++b)
        if (a != b && matrix[a][b].is_number())
          pairs.emplace_back(hosts[a].get<std::string>(), hosts[b].get<std::string>(),
                             matrix[a][b].get<double>());
    return pairs;
  }
  if (const json* slowest = find_path(rail, {"one_way", "slowest"}); slowest && slowest->is_array())
    for (const json& p : *slowest)
      if (p.contains("gbps") && p["gbps"].is_number() && p.value("from", json()).is_string() &&
          p.value("to", json()).is_string())
        pairs.emplace_back(p["from"].get<std::string>(), p["to"].get<std::string>(),
                           p["gbps"].get<double>());
  return pairs;
}

// The slowest pair of nodes of any rail, one direction at a time. A pair the pass measured again
// (docs/sweep.md, "Confirming a flag") counts by its confirmed figure with its noise in its
// favour: gate.min_pair_gbps fails a pair only below it by more than the measured spread.
Measurement slowest_pair(const json& report) {
  Measurement m{std::nullopt, "GB/s", "",   "slowest pair of nodes, one direction at a time",
                "pairwise",   "",     false};
  const json* rails = find_path(report, {"sweep", "pairwise", "rails"});
  if (!rails) return m;
  double least = std::numeric_limits<double>::infinity();
  for (const json& rail : *rails) {
    if (!rail.contains("hosts") || !rail["hosts"].is_array()) continue;
    for (const auto& [from, to, gbps] : one_way_pairs(rail)) {
      double figure = gbps;
      std::string how = "first pass";
      if (const json* c = confirmation_of(rail, from, to)) {
        const double noise = c->value("noise", 0.0);
        figure = (*c)["gbps"].get<double>() * (1 + noise);
        char text[160];
        std::snprintf(text, sizeof text,
                      "measured again over %d transfers, its noise (%.0f%%) in its favour",
                      c->value("transfers", 0), 100 * noise);
        how = text;
      }
      if (figure < least) {
        least = figure;
        m.where = "nodes " + from + " to " + to;
        m.detail = "slowest pair of nodes, one direction at a time (" + how + ")";
      }
    }
  }
  if (least < std::numeric_limits<double>::infinity()) m.value = least;
  return m;
}

Measurement weakest_rank(const json& report) {
  Measurement m{std::nullopt, "", "",   "lowest straggler score (1 is the median rank)",
                "train",      "", false};
  const json* ranks = find_path(report, {"ranks"});
  if (!ranks) return m;
  if (ranks->size() < 3) {
    m.why_not = std::to_string(ranks->size()) +
                " rank(s): a straggler needs at least 3 ranks to compare against";
    return m;
  }
  for (const json& r : *ranks)
    if (r.contains("straggler_score") && r["straggler_score"].is_number() &&
        (!m.value || r["straggler_score"].get<double>() < *m.value)) {
      m.value = r["straggler_score"].get<double>();
      m.where = "rank " + std::to_string(r.value("rank", -1)) + " (" + r.value("host", "") + ")";
    }
  return m;
}

Measurement exposed_fraction(const json& report) {
  Measurement m{std::nullopt, "", "", "comm_exposed p50 over step p50", "train", "", false};
  const auto exposed = number_at(report, {"train", "phases", "comm_exposed", "p50"});
  const auto step = number_at(report, {"train", "phases", "step", "p50"});
  if (exposed && step && *step > 0) m.value = *exposed / *step;
  return m;
}

// What the threshold's stage measured for it, read from the report.
// The check a per-unit threshold judges the figure of: min_ckpt_write_gbps_per_node judges
// min_ckpt_write_gbps's.
std::string base_check(const GateThreshold& t) {
  const std::string& c = t.threshold.check;
  return t.per.empty() ? c : c.substr(0, c.size() - std::string("_per_").size() - t.per.size());
}

Measurement measure(const GateThreshold& t, const json& report) {
  const std::string c = base_check(t);
  if (c == "min_pair_gbps") return slowest_pair(report);
  if (c == "min_straggler_score") return weakest_rank(report);
  if (c == "max_comm_exposed_fraction") return exposed_fraction(report);
  struct Source {
    const char* check;
    std::initializer_list<const char*> path;
    const char* unit;
    const char* detail;
  };
  static const Source sources[] = {
      {"max_step_cv", {"train", "step_cv"}, "", "stddev / mean of the step time"},
      {"min_au", {"train", "au"}, "", "compute p50 / step p50"},
      {"min_ckpt_write_gbps", {"checkpoint", "write_gbps"}, "GB/s", "aggregate checkpoint write"},
      {"max_ckpt_overhead",
       {"checkpoint", "overhead"},
       "",
       "checkpoint overhead: the share of training time checkpoints take"},
      {"min_goodput",
       {"job", "train_goodput"},
       "",
       "goodput: productive time over the training stage's own wall time"},
      {"min_job_goodput",
       {"job", "goodput"},
       "",
       "goodput of the whole job: productive time over its wall time"},
      {"min_restore_gbps", {"restore", "gbps"}, "GB/s", "cold restore of the last checkpoint"},
      {"max_restore_s", {"restore", "seconds"}, "s", "cold restore of the last checkpoint"},
      {"max_rto_s", {"drill", "rto_s"}, "s", "worst recovery time"},
      {"max_rpo_steps", {"drill", "rpo_steps"}, "", "steps lost, worst failure"},
  };
  for (const Source& s : sources)
    if (c == s.check)
      return {number_at(report, s.path), s.unit, t.stage, s.detail, t.stage, "", false};
  return {std::nullopt, "", "", "", t.stage, "", false};
}

// How many of a per-unit threshold's units the job has: its nodes, or its ranks that drive a GPU.
int units_in(const json& report, const std::string& per) {
  const std::string key = per == "node" ? "nodes" : "ranks";
  const auto found = report.find(key);
  if (found == report.end() || !found->is_array()) return 0;
  if (per == "node") return int(found->size());
  int gpus = 0;
  for (const json& rank : *found) gpus += rank.contains("gpu") && rank["gpu"].is_object();
  return gpus;
}

// A threshold stated per node or per GPU, multiplied by the job's count of them (docs/
// acceptance.md, "Thresholds per node or per GPU"); the source says how. Without any such unit the
// figure is not judged (why_not says so).
GateThreshold scaled_to_job(const GateThreshold& t, const json& report, Measurement& m) {
  if (t.per.empty()) return t;
  GateThreshold scaled = t;
  const int units = units_in(report, t.per);
  if (units == 0) {
    m.value.reset();
    m.why_not = t.per == "gpu" ? "no rank drives a GPU" : "the report names no node";
    return scaled;
  }
  scaled.threshold.limit = t.threshold.limit * units;
  scaled.threshold.source += " (" + exact_number(t.threshold.limit) + " per " + t.per + " x " +
                             std::to_string(units) + (t.per == "node" ? " nodes" : " GPUs") + ")";
  return scaled;
}

}  // namespace

json judge_thresholds(const GateConfig& config, const json& report, const StageAttempts& attempts) {
  json checks = json::array();
  for (const GateThreshold& t : config.thresholds) {
    const auto ran = attempts.find(t.stage);
    const bool retried = ran != attempts.end() && ran->second > 1;
    if (t.threshold.check == "min_busbw_gbps" && ran != attempts.end()) {
      for (json& check : busbw_checks(t, report, config.warn_margin, retried, config.busbw_bytes))
        checks.push_back(std::move(check));
      continue;
    }
    Measurement m = measure(t, report);
    m.passed_on_retry = retried;
    const GateThreshold scaled = scaled_to_job(t, report, m);
    if (ran == attempts.end()) {
      m.value.reset();
      if (t.stage == "drill") m.why_not = "the drill is judged when report merge joins its report";
    } else if (!m.value && m.why_not.empty()) {
      m.why_not = "stage " + t.stage + " ran but did not measure the " + t.metric;
    }
    json check = judge_threshold(scaled.threshold, m, config.warn_margin);
    if (t.advisory && check["status"] == "fail") {
      check["status"] = "warn";
      check["reason"] =
          check["reason"].get<std::string>() + "; a default, so WARN (set it to make it a gate)";
    }
    checks.push_back(std::move(check));
  }
  return checks;
}

json stage_threshold_checks(const GateConfig& config, const std::string& stage, const json& report,
                            int attempt) {
  GateConfig only = config;
  only.thresholds.clear();
  for (const GateThreshold& t : config.thresholds)
    if (t.stage == stage) only.thresholds.push_back(t);
  return judge_thresholds(only, report, {{stage, attempt}});
}

void add_threshold_checks(json& report, const GateConfig& config, const std::string& stage) {
  GateConfig given = config;
  given.thresholds.clear();
  for (const GateThreshold& t : config.thresholds)
    if (!t.advisory) given.thresholds.push_back(t);
  if (given.thresholds.empty()) return;
  json& checks = report["gate"]["checks"];
  for (json& check : judge_thresholds(given, report, {{stage, 1}})) {
    // A threshold someone set replaces the stage's own check of that name (train's
    // min_straggler_score at its default 0.8): one check per name.
    for (auto it = checks.begin(); it != checks.end();)
      it = (*it)["name"] == check["name"] ? checks.erase(it) : it + 1;
    checks.push_back(check);
  }
  report["gate"]["thresholds"] = thresholds_json(given);
  report["verdict"] = verdict_of_checks(checks);
}

bool stage_failed(const GateConfig& config, const std::string& stage, const json& report,
                  const json& stage_checks) {
  for (const json& c : stage_checks)
    if (c.value("status", "") == "fail") return true;
  for (const json& c : stage_threshold_checks(config, stage, report, 1))
    if (c.value("status", "") == "fail") return true;
  return false;
}

}  // namespace tp
