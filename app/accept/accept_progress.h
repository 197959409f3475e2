#pragma once
// How far an acceptance run got: the partial report rank 0 writes as each stage starts, and the
// reason a run that did not complete every selected stage is INCOMPLETE (docs/acceptance.md,
// "Signals, the time budget and partial reports"). Pure but for the file written.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/accept/accept_config.h"
#include "app/accept/accept_report.h"

namespace tp {

// What stopped a run before its end, as the stages saw it.
struct AcceptStop {
  int stop = 0;           // 0, a signal number, or kStopBudget (train/preemption.h)
  std::string stage;      // the stage it stopped in, or the one it did not start
  bool in_stage = false;  // it cut that stage short (false: between stages, or after the last)
  // With kStopBudget: the stage whose own deadline (accept.stage_time_s) ran out; "" when it
  // was the run's time budget.
  std::string deadline_of;
};

// `run.json` -> `run.partial.json`; a path without `.json` gets `.partial.json` added.
std::string partial_report_path(const std::string& report_path);

// "" when the run completed every selected stage and no signal reached it; else why not, naming
// the stop, the stage and the stages not run. A signal that arrives during the last stage still
// makes the run incomplete: it was asked to stop, and its verdict is not that of a run left alone.
std::string incomplete_reason(const AcceptConfig& config, const std::vector<StageAttempt>& attempts,
                              const AcceptStop& stop);

// Rank 0: the report so far, written atomically beside the final one as `stage` starts. Its
// verdict is INCOMPLETE and `accept.partial` names the running stage: whatever ends the run from
// here (a rank killed, the job's time limit, a hang the watchdog aborts), this file says how far
// it got. The final report replaces it.
void write_partial_report(const std::string& report_path, nlohmann::json report,
                          const std::string& stage);

}  // namespace tp
