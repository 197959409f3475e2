#include "app/report/prometheus.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <vector>

#include "app/report/gate.h"

namespace tp {
namespace {

using nlohmann::json;
using Labels = std::vector<std::pair<std::string, std::string>>;

// One metric family: its HELP and TYPE lines, then its samples.
class Family {
 public:
  Family(std::string name, std::string help) : name_(std::move(name)), help_(std::move(help)) {}
  void add(const Labels& labels, double value) {
    if (!std::isfinite(value)) return;
    std::string line = name_;
    if (!labels.empty()) {
      line += "{";
      for (size_t i = 0; i < labels.size(); ++i)
        line += (i ? "," : "") + labels[i].first + "=\"" +
                prometheus_label_value(labels[i].second) + "\"";
      line += "}";
    }
    char number[40];  // the shortest text that reads back as the same double
    const auto end = std::to_chars(number, number + sizeof number, value).ptr;
    samples_ += line + " " + std::string(number, end) + "\n";
  }
  std::string text() const {
    if (samples_.empty()) return "";
    return "# HELP " + name_ + " " + help_ + "\n# TYPE " + name_ + " gauge\n" + samples_;
  }

 private:
  std::string name_, help_, samples_;
};

const json* at(const json& j, std::initializer_list<const char*> keys) {
  const json* p = &j;
  for (const char* key : keys) {
    if (!p->is_object() || !p->contains(key)) return nullptr;
    p = &(*p)[key];
  }
  return p->is_null() ? nullptr : p;
}

std::string run_families(const json& report) {
  Family info("trainproof_run_info", "The run this file describes (always 1).");
  const json& context = report.value("context", json::object());
  Labels labels{{"kind", report_kind(report)}};
  for (const char* key : {"run_id", "scenario_hash"})
    if (context.contains(key) && context[key].is_string()) labels.push_back({key, context[key]});
  info.add(labels, 1);
  Family verdict("trainproof_verdict", "The run's verdict as a state set: 1 for the one it has.");
  const std::string have = report.value("verdict", "");
  for (const char* v : {"PASS", "WARN", "FAIL", "NONE", "INCOMPLETE"})
    verdict.add({{"verdict", v}}, have == v ? 1 : 0);
  return info.text() + verdict.text();
}

std::string check_families(const json& report) {
  Family status("trainproof_check_status", "Each check's status as a state set (n/a is na).");
  Family value("trainproof_check_value", "Each check's measured figure, in the check's unit.");
  Family limit("trainproof_check_threshold", "Each check's threshold, in the check's unit.");
  const json* checks = at(report, {"gate", "checks"});
  if (checks && checks->is_array())
    for (const json& check : *checks) {
      const Labels labels{{"check", check.value("name", "")},
                          {"stage", stage_of_check(check, report)}};
      std::string have = check.value("status", "");
      if (have == "n/a") have = "na";
      for (const char* s : {"pass", "warn", "fail", "na", "none", "incomplete"}) {
        Labels with = labels;
        with.push_back({"status", s});
        status.add(with, have == s ? 1 : 0);
      }
      if (check.contains("value") && check["value"].is_number()) value.add(labels, check["value"]);
      if (check.contains("threshold") && check["threshold"].is_number())
        limit.add(labels, check["threshold"]);
    }
  return status.text() + value.text() + limit.text();
}

std::string train_families(const json& report) {
  // `stat`, not `quantile`: that label belongs to summaries, and these are gauges.
  Family phase("trainproof_step_phase_seconds",
               "Step phases over every rank and measured step: stat min, p50, p99 or max.");
  const json* phases = at(report, {"train", "phases"});
  if (phases && phases->is_object())
    for (const auto& [name, figures] : phases->items()) {
      if (!figures.is_object()) continue;
      for (const char* stat : {"min", "p50", "p99", "max"})
        if (figures.contains(stat) && figures[stat].is_number())
          phase.add({{"phase", name}, {"stat", stat}}, figures[stat]);
    }
  Family goodput("trainproof_goodput_ratio",
                 "Productive time over wall time: of the training stage (scope train) or of the "
                 "whole job (scope job).");
  if (const json* g = at(report, {"job", "train_goodput"}); g && g->is_number())
    goodput.add({{"scope", "train"}}, *g);
  if (const json* g = at(report, {"job", "goodput"}); g && g->is_number())
    goodput.add({{"scope", "job"}}, *g);
  Family write("trainproof_checkpoint_write_bytes_per_second",
               "Aggregate checkpoint write bandwidth (median over saves).");
  if (const json* w = at(report, {"checkpoint", "write_gbps"}); w && w->is_number())
    write.add({}, w->get<double>() * 1e9);
  Family restore("trainproof_checkpoint_restore_bytes_per_second",
                 "Cold-restore bandwidth of the last checkpoint.");
  if (const json* r = at(report, {"restore", "gbps"}); r && r->is_number())
    restore.add({}, r->get<double>() * 1e9);
  return phase.text() + goodput.text() + write.text() + restore.text();
}

std::string sweep_families(const json& report) {
  Family busbw("trainproof_sweep_busbw_bytes_per_second",
               "Bus bandwidth of each operation and message size across all ranks, as "
               "nccl-tests computes it.");
  const json* results = at(report, {"sweep", "results"});
  if (results && results->is_array())
    for (const json& row : *results)
      if (row.value("group", "") == "world" && row.contains("busbw_gbps") &&
          row["busbw_gbps"].is_number() && row.contains("bytes"))
        busbw.add({{"op", row.value("op", "")},
                   {"message_bytes", std::to_string(row["bytes"].get<long long>())},
                   {"in_place", row.value("in_place", false) ? "true" : "false"}},
                  row["busbw_gbps"].get<double>() * 1e9);
  return busbw.text();
}

// The drill's recovery: the figures `gate.max_rto_s` and `gate.max_rpo_steps` judge, and how long
// each failure took to be detected (`failure` is its index in drill.failures[]: a drill injects a
// handful).
std::string drill_families(const json& report) {
  Family rto("trainproof_drill_rto_seconds",
             "Recovery time objective the drill measured: failure to training again.");
  Family rpo_steps("trainproof_drill_rpo_steps",
                   "Recovery point the drill measured: the steps of work lost and redone.");
  Family rpo_seconds("trainproof_drill_rpo_seconds",
                     "Recovery point the drill measured, as the time of the steps redone.");
  Family detection("trainproof_drill_detection_seconds",
                   "Each injected failure: the time from the fault to its detection.");
  if (const json* v = at(report, {"drill", "rto_s"}); v && v->is_number()) rto.add({}, *v);
  if (const json* v = at(report, {"drill", "rpo_steps"}); v && v->is_number())
    rpo_steps.add({}, *v);
  if (const json* v = at(report, {"drill", "rpo_s"}); v && v->is_number()) rpo_seconds.add({}, *v);
  if (const json* failures = at(report, {"drill", "failures"}); failures && failures->is_array())
    for (size_t i = 0; i < failures->size(); ++i) {
      const json& f = (*failures)[i];
      if (f.is_object() && f.value("detected", false) && f.contains("detected_after_s") &&
          f["detected_after_s"].is_number())
        detection.add({{"failure", std::to_string(i)}, {"kind", f.value("kind", "")}},
                      f["detected_after_s"]);
    }
  return rto.text() + rpo_steps.text() + rpo_seconds.text() + detection.text();
}

// The median of the measured cells of one node's row (what it sent) or column (what it received).
std::optional<double> node_median(const json& matrix, size_t node, bool sent) {
  std::vector<double> cells;
  for (size_t other = 0; other < matrix.size(); ++other) {
    if (other == node || !matrix[other].is_array()) continue;
    const json& row = sent ? matrix[node] : matrix[other];
    const size_t column = sent ? other : node;
    if (row.is_array() && column < row.size() && row[column].is_number())
      cells.push_back(row[column]);
  }
  if (cells.empty()) return std::nullopt;
  std::sort(cells.begin(), cells.end());
  const size_t mid = cells.size() / 2;
  return cells.size() % 2 ? cells[mid] : (cells[mid - 1] + cells[mid]) / 2;
}

// Each node's pairwise bandwidth per rail, direction and mode: the median over its peers, so the
// series grow with the nodes and never with the pairs (4,096 nodes make 16 million pairs).
std::string pairwise_families(const json& report) {
  Family node("trainproof_pairwise_node_bytes_per_second",
              "Each node's pairwise bandwidth: the median over its peers of what it sent or "
              "received, one direction at a time (one_way) or both at once (both_ways).");
  const json* rails = at(report, {"sweep", "pairwise", "rails"});
  if (rails && rails->is_array())
    for (const json& rail : *rails) {
      if (!rail.is_object() || !rail.contains("hosts") || !rail["hosts"].is_array()) continue;
      const json& hosts = rail["hosts"];
      const std::string rail_id = std::to_string(rail.value("rail", 0));
      for (const char* mode : {"one_way", "both_ways"}) {
        const json* matrix = at(rail, {(std::string(mode) + "_gbps").c_str()});
        if (!matrix || !matrix->is_array()) continue;
        for (size_t n = 0; n < hosts.size() && n < matrix->size(); ++n) {
          if (!hosts[n].is_string()) continue;
          for (const bool sent : {true, false})
            if (const auto gbps = node_median(*matrix, n, sent))
              node.add({{"host", hosts[n]},
                        {"rail", rail_id},
                        {"direction", sent ? "send" : "receive"},
                        {"mode", mode}},
                       *gbps * 1e9);
        }
      }
    }
  return node.text();
}

std::string node_families(const json& report) {
  Family flagged("trainproof_node_flagged", "1 when a check flagged the node, else 0.");
  if (const json* nodes = at(report, {"nodes"}); nodes && nodes->is_array())
    for (const json& n : *nodes)
      if (n.contains("host") && n["host"].is_string())
        flagged.add({{"host", n["host"]}}, n.value("flagged", false) ? 1 : 0);
  return flagged.text();
}

}  // namespace

std::string prometheus_label_value(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string render_prometheus(const json& report) {
  return run_families(report) + check_families(report) + train_families(report) +
         sweep_families(report) + pairwise_families(report) + drill_families(report) +
         node_families(report);
}

}  // namespace tp
