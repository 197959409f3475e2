#pragma once
// The gate (docs/acceptance.md, "Checks"): every threshold of a run (accept, train, sweep) held
// against what its stages measured, read from the report being built, so the judgement is a
// pure function of the report and unit-tested on fixtures.
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "app/judge/gate_config.h"

namespace tp {

// How many times each stage ran (1 when it passed at once; absent when it did not run).
using StageAttempts = std::map<std::string, int>;

// One gate check per threshold; gate.min_busbw_gbps gives one per operation the sweep timed
// ("min_busbw_gbps.allreduce"). A stage that did not run makes its checks n/a; a stage that ran
// more than once makes a pass a WARN.
nlohmann::json judge_thresholds(const GateConfig& config, const nlohmann::json& report,
                                const StageAttempts& attempts);

// One stage's thresholds, judged on the report as that stage's attempt left it.
nlohmann::json stage_threshold_checks(const GateConfig& config, const std::string& stage,
                                      const nlohmann::json& report, int attempt);
// For train and sweep: the thresholds someone set (a default threshold is accept's advice only),
// judged on `report` as `stage` left it, added to report["gate"]["checks"] with their sources
// listed in report["gate"]["thresholds"], and the verdict judged again from every check.
void add_threshold_checks(nlohmann::json& report, const GateConfig& config,
                          const std::string& stage);

// A stage whose own checks or thresholds fail is retried.
bool stage_failed(const GateConfig& config, const std::string& stage, const nlohmann::json& report,
                  const nlohmann::json& stage_checks);

}  // namespace tp
