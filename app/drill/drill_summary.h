#pragma once
// What `trainproof drill` prints and the drill section of its JSON report, formatted from the
// typed records only (docs/drills.md, "Reading the summary").
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/drill/drill_records.h"

namespace tp {

nlohmann::json failure_json(const DrillFailure& failure);
// The report's `drill` section; the launcher and the problems redacted.
nlohmann::json drill_json(const DrillResult& result);

// When the drill ran, and how it was invoked, for the report's context.
struct DrillContext {
  std::string run_id;  // the drill's own (--run_id): its report's context.run_id
  std::string started;
  std::string ended;
  std::vector<std::string> command_line;
};

// The drill's report: the final run's report (or an empty one) with the drill section, the
// drill's context, a `drill` gate check and the combined verdict. The launcher, command line and
// problems are redacted (app/report/redact.h) and every string is made UTF-8
// (app/report/report_text.h), so the report can always be written.
nlohmann::json drill_report(nlohmann::json final_report, const DrillResult& result,
                            const DrillContext& context);

// "drill: <fault> fired on rank R, step S P; launcher exited E after T s", printed as each
// failure is classified.
std::string fired_line(const DrillFailure& failure);
// One failure's line in the summary, without indentation or newline.
std::string failure_line(const DrillFailure& failure);
// The summary printed at the end of a drill, from its blank first line to the report's path.
std::string drill_summary(const DrillResult& result, const std::string& report_path);

}  // namespace tp
