#pragma once
// The acceptance run's one report (docs/acceptance.md): every stage's sections, each stage's own
// checks and the gate's thresholds, every attempt a retry made, and one verdict. Pure, so the
// assembly is unit-tested on fixtures.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/accept/accept_config.h"
#include "app/judge/gate_judge.h"

namespace tp {

// One run of one stage, as rank 0 holds it.
struct StageAttempt {
  std::string stage;
  int attempt = 1;
  nlohmann::json sections = nlohmann::json::object();  // report key -> section
  nlohmann::json checks = nlohmann::json::array();     // the stage's own checks
  // The stage's thresholds as this attempt met them (the last attempt's are judged again on
  // the whole report).
  nlohmann::json threshold_checks = nlohmann::json::array();
  // A signal or the time budget cut it short (train/preemption.h): what it measured is kept, and
  // it never counts as completed.
  bool stopped = false;
};

// Merges a stage's sections into a report under construction; sweep and pairwise share `sweep`.
// `nodes` is one list per host for the whole job: each stage adds its findings to a node's
// reasons (the preflight's first, in the order the stages ran), and none replaces another's.
void add_sections(nlohmann::json& report, const nlohmann::json& sections);

// The report from every attempt, in the order they ran (the last of each stage counts), the
// sections of the whole job (`job`, `cost`) and the context of the richest stage. `golden` is
// --baseline's report, or null. `incomplete` is "" for a run that completed every selected stage,
// else why not (accept_progress.h): a `run_complete` check then makes the verdict INCOMPLETE,
// unless a check failed.
nlohmann::json accept_report(const AcceptConfig& config, const std::vector<StageAttempt>& attempts,
                             const nlohmann::json& job_sections, nlohmann::json context,
                             const nlohmann::json& golden, const std::string& incomplete = "");

}  // namespace tp
