#pragma once
// The verdict of `trainproof drill`, a pure function of its records (docs/drills.md, "What RPO
// and RTO mean here" and "Reading the summary"): PASS only when the final digest equals the
// reference, every failure was detected, and no other problem was found on the way.
#include <nlohmann/json.hpp>
#include <string>

#include "app/drill/drill_records.h"

namespace tp {

// Fills the digest match, the worst RPO and RTO, the redone work and the verdict of `result`,
// adding the problems the verdict finds to those found while the drill ran. `step_p50_s` turns
// steps into seconds.
void decide_verdict(DrillResult& result, double step_p50_s);

// The verdict of the drill's report: FAIL when the drill failed, else the final run's own (a
// flagged slow rank makes it WARN).
std::string combined_verdict(const DrillResult& result, const nlohmann::json& final_report);

// train.final_digest of a run's report; empty when it has none.
std::string final_digest_of(const nlohmann::json& report);
// train.phases.step.p50 of a run's report; 0 when it has none.
double median_step_seconds(const nlohmann::json& report);

}  // namespace tp
