#include "app/judge/baseline.h"

#include <cctype>

#include "app/cli/option_values.h"
#include "app/judge/report_compare.h"
#include "app/report/gate.h"
#include "app/report/report_reader.h"
#include "common/errors.h"
#include "common/files.h"

namespace tp {

using nlohmann::json;

Baseline baseline_from(const boost::program_options::variables_map& vm) {
  Baseline b;
  b.path = vm["baseline"].as<std::string>();
  b.tolerance = in_range(vm, "tolerance", 0.0, 1.0, true);
  if (b.path.empty()) return b;
  // The same reader as `trainproof report`: what one refuses, the other does too.
  b.golden = read_report_file(b.path, "--baseline");
  return b;
}

json baseline_checks(const json& golden, const json& report, double tolerance,
                     const std::string& golden_path) {
  const json comparison = compare_reports(golden, report, tolerance);
  json checks = json::array();
  for (const json& m : comparison["metrics"]) {
    json threshold = nullptr;
    if (m["golden"].is_number())
      threshold = m.value("better", "") == "higher" ? m["golden"].get<double>() * tolerance
                                                    : m["golden"].get<double>() / tolerance;
    // "step p50" -> baseline_step_p50, "sweep avg busbw >= 1 MiB" ->
    // baseline_sweep_avg_busbw_1_MiB: a check name a script can match.
    std::string name = "baseline_";
    for (char c : m.value("name", std::string()))
      if (std::isalnum(static_cast<unsigned char>(c)))
        name += c;
      else if (name.back() != '_')
        name += '_';
    if (name.back() == '_') name.pop_back();
    json check = gate_check(name, m["new"], threshold, m.value("status", "n/a"),
                            m.value("reason", "") + " (golden " + golden_path + ")");
    check["direction"] = m.value("better", "") == "higher" ? "at_least" : "at_most";
    check["source"] = "--baseline " + golden_path;
    checks.push_back(std::move(check));
  }
  for (const json& d : comparison["differences"])
    checks.push_back(
        gate_check("baseline_same_work", nullptr, nullptr, "warn", d.get<std::string>()));
  return checks;
}

void judge_against_baseline(json& report, const Baseline& baseline) {
  if (baseline.golden.is_null()) return;
  for (const json& c : baseline_checks(baseline.golden, report, baseline.tolerance, baseline.path))
    report["gate"]["checks"].push_back(c);
  report["verdict"] = verdict_of_checks(report["gate"]["checks"]);
}

}  // namespace tp
