#pragma once
// --baseline GOLDEN (docs/acceptance.md, "Baselines"): a golden report of the same work, read
// before MPI starts, whose report compare metrics become gate checks of the new report.
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>
#include <string>

namespace tp {

struct Baseline {
  std::string path;        // empty: no --baseline
  nlohmann::json golden;   // null without one
  double tolerance = 0.9;  // --tolerance
};

// UsageError (exit 2) naming --baseline for a file that is missing or not a report, and
// --tolerance outside (0, 1].
Baseline baseline_from(const boost::program_options::variables_map& vm);

// --baseline: each metric of report compare as a gate check named baseline_<metric>, its
// threshold the golden value times the tolerance.
nlohmann::json baseline_checks(const nlohmann::json& golden, const nlohmann::json& report,
                               double tolerance, const std::string& golden_path);

// Appends the baseline_* checks to report.gate.checks and recomputes the verdict; nothing
// without a baseline.
void judge_against_baseline(nlohmann::json& report, const Baseline& baseline);

}  // namespace tp
