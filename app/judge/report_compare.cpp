#include "app/judge/report_compare.h"

#include <cstdio>
#include <string>

#include "app/report/gate.h"
#include "app/report/summary_parts.h"
#include "common/number_text.h"

namespace tp {
namespace {

using nlohmann::json;

struct Metric {
  const char* name;
  const char* pointer;  // JSON pointer into a report
  bool higher_is_better;
  const char* unit;  // the report's
  // As the summary shows it: the report's value times `shown_scale`, in `shown_unit`.
  const char* shown_unit;
  double shown_scale;
};

constexpr Metric kMetrics[] = {
    {"samples/s", "/train/samples_per_s", true, "samples/s", "samples/s", 1},
    {"tokens/s", "/train/tokens_per_s", true, "tokens/s", "tokens/s", 1},
    {"AU", "/train/au", true, "", "%", 100},
    {"step p50", "/train/phases/step/p50", false, "s", "ms", 1e3},
    {"compute p50", "/train/phases/compute/p50", false, "s", "ms", 1e3},
    {"comm p50", "/train/phases/comm/p50", false, "s", "ms", 1e3},
    {"achieved FLOP/s", "/train/achieved_flops", true, "FLOP/s", "GFLOP/s", 1e-9},
    {"checkpoint write", "/checkpoint/write_gbps", true, "GB/s", "GB/s", 1},
    {"checkpoint restore", "/checkpoint/restore_gbps", true, "GB/s", "GB/s", 1},
    {"checkpoint overhead", "/checkpoint/overhead", false, "", "%", 100},
    {"data read", "/data/read_gbps", true, "GB/s", "GB/s", 1},
    {"sweep avg busbw", "/sweep/groups/0/avg_busbw_gbps", true, "GB/s", "GB/s", 1},
    {"sweep avg busbw >= 1 MiB", "/sweep/groups/0/avg_busbw_gbps_1mib", true, "GB/s", "GB/s", 1},
};

const json* find(const json& report, const char* pointer) {
  const json::json_pointer p(pointer);
  return report.contains(p) ? &report.at(p) : nullptr;
}

// A metric's value, when the report holds it as a number.
const json* number_at(const json& report, const char* pointer) {
  const json* value = find(report, pointer);
  return value && value->is_number() ? value : nullptr;
}

std::string change_text(const Metric& m, double ratio, double kept, double tolerance);

json metric_row(const Metric& m, const json& golden, const json& fresh, double tolerance) {
  json row = {{"name", m.name},
              {"unit", m.unit},
              {"shown_unit", m.shown_unit},
              {"shown_scale", m.shown_scale},
              {"better", m.higher_is_better ? "higher" : "lower"}};
  const json* g = number_at(golden, m.pointer);
  const json* n = number_at(fresh, m.pointer);
  row["golden"] = g ? *g : json(nullptr);
  row["new"] = n ? *n : json(nullptr);
  row["ratio"] = nullptr;
  if (!g || !n) {
    row["status"] = "n/a";
    row["reason"] = std::string("not in ") + (!g && !n ? "either report"
                                              : !g     ? "the golden report"
                                                       : "the new report");
    return row;
  }
  const double gv = g->get<double>(), nv = n->get<double>();
  if (gv == 0) {
    row["status"] = "n/a";
    row["reason"] = "golden is 0";
    return row;
  }
  // A time of 0 was never measured (a phase that did not run, or a report written by hand): it
  // would otherwise read as infinitely faster.
  if (nv == 0 && std::string(m.unit) == "s") {
    row["status"] = "n/a";
    row["reason"] = "new is 0: no time was measured";
    return row;
  }
  const double ratio = nv / gv;
  row["ratio"] = ratio;
  // The share of the golden figure the new one keeps, in the metric's better direction.
  const double kept = m.higher_is_better ? ratio : (nv > 0 ? gv / nv : 1e300);
  const bool fell = kept < tolerance;
  row["status"] = fell ? "fail" : "pass";
  row["reason"] = change_text(m, ratio, kept, tolerance);
  return row;
}

// What changed, in the direction the ratio column shows (new / golden), then whether that is
// better or worse and the bound the tolerance sets on it: "rose to 125% of golden: worse (lower
// is better; tolerance 0.9 allows up to 111%)", never "ratio 1.25 ... fell to 80%".
std::string change_text(const Metric& m, double ratio, double kept, double tolerance) {
  const std::string better = m.higher_is_better ? "higher" : "lower";
  const std::string bound = m.higher_is_better ? "down to " + readable_percent(tolerance)
                                               : "up to " + readable_percent(1 / tolerance);
  const std::string rule = " (" + better + " is better; tolerance " + readable_number(tolerance) +
                           " allows " + bound + ")";
  if (ratio == 1) return "the same as golden" + rule;
  const std::string moved = std::string(ratio > 1 ? "rose to " : "fell to ") +
                            readable_percent(std::min(ratio, 1e6)) + " of golden";
  return moved +
         (kept >= 1          ? ": better"
          : kept < tolerance ? ": worse"
                             : ": worse, within the tolerance") +
         rule;
}

std::string text_of(const json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

void note_difference(json& differences, const std::string& what, const json* golden,
                     const json* fresh) {
  if (!golden || !fresh || *golden == *fresh) return;
  differences.push_back(what + " differ: golden " + text_of(*golden) + ", new " + text_of(*fresh));
}

// A stage one report holds and the other does not (it was not selected, or a stop cut the run
// short): its metrics are n/a, and the note says why.
void note_missing_stages(json& differences, const json& golden, const json& fresh) {
  for (const char* section : {"sweep", "train", "checkpoint", "data", "restore"}) {
    const bool in_golden = golden.contains(section), in_new = fresh.contains(section);
    if (in_golden == in_new) continue;
    differences.push_back(std::string("only the ") + (in_golden ? "golden" : "new") +
                          " report has a " + section + " section: its metrics are n/a");
  }
  for (const auto& [which, report] : {std::pair{"golden", &golden}, std::pair{"new", &fresh}})
    if (const json* why = find(*report, "/accept/incomplete"); why && why->is_string())
      differences.push_back(std::string("the ") + which + " run is INCOMPLETE (" +
                            why->get<std::string>() + "): only what both hold is compared");
}

json differences_of(const json& golden, const json& fresh) {
  json differences = json::array();
  note_missing_stages(differences, golden, fresh);
  const json* gh = find(golden, "/context/scenario_hash");
  const json* nh = find(fresh, "/context/scenario_hash");
  if (gh && nh && *gh != *nh)
    differences.push_back("scenario hashes differ (golden " + text_of(*gh) + ", new " +
                          text_of(*nh) + "): this compares different work");
  note_difference(differences, "world sizes", find(golden, "/context/world_size"),
                  find(fresh, "/context/world_size"));
  note_difference(differences, "steps", find(golden, "/train/steps_completed"),
                  find(fresh, "/train/steps_completed"));
  note_difference(differences, "compute backends", find(golden, "/context/backends/compute"),
                  find(fresh, "/context/backends/compute"));
  note_difference(differences, "comm backends", find(golden, "/context/backends/comm"),
                  find(fresh, "/context/backends/comm"));
  for (const char* key : {"/sweep/min_bytes", "/sweep/max_bytes", "/sweep/dtype", "/sweep/backend"})
    note_difference(differences, std::string("sweep ") + (key + 7), find(golden, key),
                    find(fresh, key));
  return differences;
}

}  // namespace

json compare_reports(const json& golden, const json& fresh, double tolerance) {
  json metrics = json::array();
  bool compared = false, fell = false;
  for (const Metric& m : kMetrics) {
    json row = metric_row(m, golden, fresh, tolerance);
    compared = compared || row["status"] != "n/a";
    fell = fell || row["status"] == "fail";
    metrics.push_back(std::move(row));
  }
  return {{"tolerance", tolerance},
          {"metrics", metrics},
          {"differences", differences_of(golden, fresh)},
          {"verdict", fell       ? "FAIL"
                      : compared ? "PASS"
                                 : "NONE"}};
}

std::string render_comparison(const json& c) {
  std::string out = printf_text("%-26s %12s %12s %-10s %7s  %-6s  %s\n", "metric", "golden", "new",
                                "unit", "ratio", "better", "status");
  for (const json& m : c.at("metrics")) {
    // As the summary shows it (milliseconds, percent, GFLOP/s); older rows carry no scale.
    const double scale = m.value("shown_scale", 1.0);
    const std::string unit = m.value("shown_unit", m.value("unit", std::string()));
    auto number = [scale](const json& v) {
      return v.is_number() ? readable_number(v.get<double>() * scale) : std::string("n/a");
    };
    out += printf_text(
        "%-26s %12s %12s %-10s %7s  %-6s  %s\n", m.at("name").get<std::string>().c_str(),
        number(m.at("golden")).c_str(), number(m.at("new")).c_str(),
        unit.empty() ? "-" : unit.c_str(),
        m.at("ratio").is_null() ? "n/a" : readable_number(m.at("ratio").get<double>()).c_str(),
        m.at("better").get<std::string>().c_str(),
        m.at("status").get<std::string>() == "fail"
            ? ("FAIL: " + m.at("reason").get<std::string>()).c_str()
            : m.at("status").get<std::string>().c_str());
  }
  for (const json& d : c.at("differences")) out += "note: " + d.get<std::string>() + "\n";
  out += "tolerance " + readable_number(c.at("tolerance").get<double>()) +
         "; verdict: " + c.at("verdict").get<std::string>() + "\n";
  return out;
}

}  // namespace tp
