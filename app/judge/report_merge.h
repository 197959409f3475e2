#pragma once
// `trainproof report merge A B ...`: the stage reports of one acceptance joined into one report,
// with its verdict recomputed. The drill runs apart from `accept` (its final run trains with
// injected faults), so the accept report is the base and the drill's report adds only the drill.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tp {

// A report as read from a file named on the command line.
struct StageReport {
  std::string file;
  nlohmann::json report;
};

// The merged report. Exactly one input must be an accept report (it has an `accept` key) and at
// most one a drill report (a `drill` key); UsageError naming the files otherwise.
// - Every section of the accept report is kept (never replaced), its context and gate included.
// - From the drill report: `drill`, context.drill, and the `drill` gate check; its train run's
//   sections and checks stay out.
// - Any other report adds only sections the merged report lacks.
// - merged_from[] lists {file, kind, sections} for every input; a scenario hash that differs from
//   the accept report's adds a context.warnings line naming both.
// - Each gate.thresholds[] entry of stage "drill" is judged (app/judge/thresholds.h) from the
// drill's
//   report: "drill" (1 when the drill passed), "max_rto_s" (drill.rto_s), "max_rpo_steps"
//   (drill.rpo_steps); a figure the drill did not measure stays n/a. Without a "drill" threshold
//   the drill's own check is added as it is. The verdict follows the checks.
// - With a `job` section and drill failures, job.drill says what the failures cost
//   ({redone_s, recovery_s, failures, note}); job.goodput is left as the accept run measured it.
nlohmann::json merge_reports(const std::vector<StageReport>& inputs);

}  // namespace tp
