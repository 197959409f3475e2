#include "app/drill/drill_verdict.h"

#include <algorithm>

namespace tp {
namespace {

using nlohmann::json;

// The rpo_steps of a failure; a failure no relaunch followed lost nothing it could measure.
int64_t rpo_steps_of(const DrillFailure& failure) {
  return failure.recovery && failure.recovery->rpo_steps ? *failure.recovery->rpo_steps : 0;
}

void add_verdict_problems(DrillResult& result) {
  for (const DrillFailure& failure : result.failures)
    if (!failure.detected) result.problems.push_back(failure.kind + " was not detected");
  if (result.digest_match) return;
  // A digest that cannot match by construction is not a failed proof: the verdict says WARN.
  if (!result.final_digest.empty() && !result.proof_not_applicable.empty()) return;
  result.problems.push_back(result.final_digest.empty()
                                ? "the drill never finished a run"
                                : "final digest " + result.final_digest +
                                      " differs from the reference " + result.reference_digest);
}

// RPO and RTO are the worst over the failures; redone work is the sum of their losses.
void measure_recovery(DrillResult& result, double step_p50_s) {
  int64_t worst_rpo = 0;
  int64_t redone_steps = 0;
  std::optional<double> worst_rto;
  for (const DrillFailure& failure : result.failures) {
    worst_rpo = std::max(worst_rpo, rpo_steps_of(failure));
    redone_steps += rpo_steps_of(failure);
    if (failure.recovery && failure.recovery->rto_s)
      worst_rto = std::max(worst_rto.value_or(0.0), *failure.recovery->rto_s);
  }
  result.rpo_steps = std::nullopt;
  result.rpo_s = std::nullopt;
  if (!result.failures.empty()) {
    result.rpo_steps = worst_rpo;
    result.rpo_s = double(worst_rpo) * step_p50_s;
  }
  result.rto_s = worst_rto;
  result.redone_step_seconds = double(redone_steps) * step_p50_s;
}

}  // namespace

void decide_verdict(DrillResult& result, double step_p50_s) {
  result.digest_match =
      !result.final_digest.empty() && result.final_digest == result.reference_digest;
  add_verdict_problems(result);
  measure_recovery(result, step_p50_s);
  const bool proven = result.digest_match || result.proof_not_applicable.empty();
  result.verdict = !result.problems.empty() ? "FAIL" : proven ? "PASS" : "WARN";
}

std::string combined_verdict(const DrillResult& result, const json& final_report) {
  if (!result.problems.empty()) return "FAIL";
  const auto verdict = final_report.is_object() ? final_report.find("verdict") : final_report.end();
  const std::string run =
      verdict == final_report.end() || !verdict->is_string() ? "PASS" : verdict->get<std::string>();
  return run == "PASS" && result.verdict == "WARN" ? "WARN" : run;
}

std::string final_digest_of(const json& report) {
  if (!report.is_object() || !report.contains("train") || !report["train"].is_object()) return "";
  return report["train"].value("final_digest", "");
}

double median_step_seconds(const json& report) {
  const json::json_pointer p50("/train/phases/step/p50");
  if (!report.is_object() || !report.contains(p50) || !report[p50].is_number()) return 0.0;
  return report[p50].get<double>();
}

}  // namespace tp
