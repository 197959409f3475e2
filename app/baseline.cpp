#include "app/baseline.h"

#include <fstream>

#include "app/accept_gate.h"
#include "app/gate.h"
#include "app/option_values.h"
#include "common/errors.h"
#include "common/files.h"

namespace tp {

using nlohmann::json;

Baseline baseline_from(const boost::program_options::variables_map& vm) {
  Baseline b;
  b.path = vm["baseline"].as<std::string>();
  b.tolerance = in_range(vm, "tolerance", 0.0, 1.0, true);
  if (b.path.empty()) return b;
  if (const std::string what = not_a_regular_file(b.path); !what.empty())
    throw UsageError("--baseline: '" + b.path + "' " + what);
  std::ifstream file(b.path);
  if (!file) throw UsageError("--baseline: cannot open '" + b.path + "'");
  try {
    b.golden = json::parse(file);
  } catch (const json::exception& e) {
    throw UsageError("--baseline: '" + b.path + "': " + e.what());
  }
  if (!b.golden.is_object() || !b.golden.contains("schema") || !b.golden["schema"].is_string() ||
      b.golden["schema"].get<std::string>().rfind("trainproof.report/", 0) != 0)
    throw UsageError("--baseline: '" + b.path + "' is not a trainproof report");
  return b;
}

void judge_against_baseline(json& report, const Baseline& baseline) {
  if (baseline.golden.is_null()) return;
  for (const json& c : baseline_checks(baseline.golden, report, baseline.tolerance, baseline.path))
    report["gate"]["checks"].push_back(c);
  report["verdict"] = verdict_of_checks(report["gate"]["checks"]);
}

}  // namespace tp
