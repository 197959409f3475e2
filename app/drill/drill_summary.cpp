#include "app/drill/drill_summary.h"

#include <algorithm>
#include <cstdio>

#include "app/drill/drill_verdict.h"
#include "app/report/report.h"
#include "app/report/report_text.h"
#include "common/number_text.h"
#include "common/redact.h"

namespace tp {
namespace {

using nlohmann::json;

template <typename Value>
json or_null(const std::optional<Value>& value) {
  return value ? json(*value) : json(nullptr);
}

// A field as the summary shows it: text as is, anything else (null included) as JSON.
std::string shown(const std::optional<std::string>& text) {
  return text ? *text : "null";
}
template <typename Value>
std::string shown(const std::optional<Value>& value) {
  return or_null(value).dump();
}

json named_rank_json(const WatchdogNamedRank& named) {
  return {{"rank", named.rank},
          {"host", or_null(named.host)},
          {"last_step", named.last_step},
          {"last_phase", named.last_phase},
          {"last_seen_unix", named.last_seen_unix}};
}

void add_recovery(json& record, const DrillRecovery& recovery) {
  record["restored_step"] = or_null(recovery.restored_step);
  record["expected_restored_step"] = or_null(recovery.expected_restored_step);
  // Present only when the relaunch recorded its restore, so a missing record stays visible.
  if (recovery.recorded) record["restore_gbps"] = or_null(recovery.restore_gbps);
  if (recovery.rto_s) record["rto_s"] = *recovery.rto_s;
  if (recovery.rpo_steps) record["rpo_steps"] = *recovery.rpo_steps;
}

json gate_check(const DrillResult& result) {
  const bool pass = result.problems.empty();
  const bool unproven = pass && result.verdict == "WARN";
  return {{"name", "drill"},
          {"value", result.verdict},
          {"threshold", "digest match, every failure detected and restored"},
          {"status", !pass      ? "fail"
                     : unproven ? "warn"
                                : "pass"},
          {"reason", !pass      ? redact_text(result.problems.front())
                     : unproven ? "every failure detected and restored; the bit-exact proof does "
                                  "not apply: " +
                                      result.proof_not_applicable
                                : "final digest matches the reference after " +
                                      std::to_string(result.failures.size()) + " failure(s)"}};
}

json node_loss_json(const DrillFailure& failure) {
  const NodeLossResponse& response = *failure.node_loss;
  return {{"action", response.action},
          {"lost_ranks", failure.lost_ranks},
          {"world_size_before", response.world_size_before},
          {"world_size_after", or_null(response.world_size_after)},
          {"excluded", response.excluded},
          {"launcher", redact_text(response.launcher)}};
}

std::string format(const char* pattern, auto... values) {
  const int length = std::snprintf(nullptr, 0, pattern, values...);
  std::string text(size_t(std::max(length, 0)) + 1, '\0');
  std::snprintf(text.data(), text.size(), pattern, values...);
  text.pop_back();
  return text;
}

// "RPO 6 steps (0.53 s); RTO 5.65 s": a person's numbers (common/number_text.h), n/a where the
// drill measured none.
std::string recovery_text(const DrillResult& result) {
  auto seconds = [](const std::optional<double>& s) {
    return s ? readable_number(*s) + " s" : std::string("n/a");
  };
  std::string rpo = "n/a";
  if (result.rpo_steps)
    rpo = std::to_string(*result.rpo_steps) + " steps" +
          (result.rpo_s ? " (" + seconds(result.rpo_s) + ")" : "");
  return "RPO " + rpo + "; RTO " + seconds(result.rto_s);
}

// The summary's failure lines have always been cut at this length.
constexpr size_t kFailureLineMax = 511;

}  // namespace

json failure_json(const DrillFailure& failure) {
  json record{{"kind", failure.kind},
              {"fault", failure.fault},
              {"fault_unix", failure.fault_unix},
              {"detected", failure.detected},
              {"rank", or_null(failure.rank)},
              {"host", or_null(failure.host)},
              {"step", or_null(failure.step)},
              {"phase", or_null(failure.phase)},
              {"last_completed_step", or_null(failure.last_completed_step)},
              {"exit_code", failure.exit_code},
              {"run", failure.run},
              {"detected_after_s", failure.detected_after_s}};
  if (failure.timed_out) record["timed_out"] = true;
  if (failure.named_by_watchdog) {
    record["named_by_watchdog"] = json::array();
    for (const WatchdogNamedRank& named : *failure.named_by_watchdog)
      record["named_by_watchdog"].push_back(named_rank_json(named));
  }
  if (failure.recovery) add_recovery(record, *failure.recovery);
  if (!failure.lost_ranks.empty()) record["lost_ranks"] = failure.lost_ranks;
  if (failure.node_loss) record["node_loss"] = node_loss_json(failure);
  return record;
}

json drill_json(const DrillResult& result) {
  json failures = json::array();
  for (const DrillFailure& failure : result.failures) failures.push_back(failure_json(failure));
  json corruptions = json::array();
  for (const DrillCorruption& damage : result.corruptions)
    corruptions.push_back(
        {{"fault", damage.fault}, {"folder", damage.folder}, {"file", damage.file}});
  json runs = json::array();
  for (const DrillRunEntry& run : result.runs)
    runs.push_back({{"name", run.name}, {"exit_code", run.exit_code}, {"dir", run.dir}});
  json problems = json::array();
  for (const std::string& problem : result.problems) problems.push_back(redact_text(problem));
  return {{"launcher", redact_text(result.launcher)},
          {"folder", result.folder},
          {"seed", result.seed},
          {"failures", failures},
          {"corruptions", corruptions},
          {"restarts", result.restarts},
          {"reference_digest", result.reference_digest},
          {"final_digest", result.final_digest},
          {"digest_match", result.digest_match},
          {"proof_not_applicable",
           result.proof_not_applicable.empty() ? json(nullptr) : json(result.proof_not_applicable)},
          {"runs", runs},
          {"problems", problems},
          {"rpo_steps", or_null(result.rpo_steps)},
          {"rpo_s", or_null(result.rpo_s)},
          {"rto_s", or_null(result.rto_s)},
          {"redone_step_seconds", result.redone_step_seconds},
          {"verdict", result.verdict}};
}

json drill_report(json final_report, const DrillResult& result, const DrillContext& context) {
  const std::string verdict = combined_verdict(result, final_report);
  json report = final_report.is_object() ? std::move(final_report) : json::object();
  report["schema"] = kReportSchema;
  report["drill"] = drill_json(result);
  report["context"]["run_id"] = context.run_id;
  report["context"]["drill"] = {{"started", context.started},
                                {"ended", context.ended},
                                {"command_line", redact_argv(context.command_line)}};
  if (!report.contains("gate")) report["gate"] = {{"checks", json::array()}};
  report["gate"]["checks"].push_back(gate_check(result));
  report["verdict"] = verdict;
  make_report_text_valid(report);
  return report;
}

std::string fired_line(const DrillFailure& failure) {
  return format("drill: %s fired on rank %s, step %s %s; launcher exited %d after %.2f s\n",
                failure.fault.c_str(), shown(failure.rank).c_str(), shown(failure.step).c_str(),
                shown(failure.phase).c_str(), failure.exit_code, failure.detected_after_s);
}

// "shrink 6 -> 4 ranks": how the drill relaunched after a lost node.
std::string resize_text(const DrillFailure& failure) {
  if (!failure.node_loss) return "";
  const NodeLossResponse& response = *failure.node_loss;
  return "; " + response.action + " " + std::to_string(response.world_size_before) + " -> " +
         shown(response.world_size_after) + " ranks";
}

std::string failure_line(const DrillFailure& failure) {
  const std::string restored = failure.recovery && failure.recovery->restored_step
                                   ? std::to_string(*failure.recovery->restored_step)
                                   : "null";
  // A lost node names its host and how many ranks went with it, not one rank.
  const std::string who = failure.lost_ranks.empty()
                              ? "rank " + shown(failure.rank) + " on " + shown(failure.host)
                              : "host " + shown(failure.host) + " (" +
                                    std::to_string(failure.lost_ranks.size()) + " ranks)";
  return format("%-12s %s, step %s %s: %s after %.2f s%s; restored %s", failure.kind.c_str(),
                who.c_str(), shown(failure.step).c_str(), shown(failure.phase).c_str(),
                failure.detected ? "detected" : "NOT DETECTED", failure.detected_after_s,
                resize_text(failure).c_str(), restored.c_str())
      .substr(0, kFailureLineMax);
}

std::string drill_summary(const DrillResult& result, const std::string& report_path) {
  std::string text = "\ndrill summary (" + result.folder + ")\n";
  if (result.failures.empty()) text += "  no failures injected\n";
  for (const DrillFailure& failure : result.failures) text += "  " + failure_line(failure) + "\n";
  for (const DrillCorruption& damage : result.corruptions)
    text += "  corrupt    " + damage.fault + " -> " + damage.file + "\n";
  text += "  restarts " + std::to_string(result.restarts) + "; " + recovery_text(result) + "\n";
  text += "  digest: reference " + result.reference_digest + ", final " +
          (result.final_digest.empty() ? std::string("none") : result.final_digest) + ": " +
          (result.digest_match ? "MATCH" : "DIFFER") + "\n";
  if (!result.digest_match && !result.proof_not_applicable.empty())
    text += "  the bit-exact proof does not apply: " + result.proof_not_applicable + "\n";
  for (const std::string& problem : result.problems)
    text += "  problem: " + redact_text(problem) + "\n";
  text += "drill verdict: " + result.verdict + "\nreport: " + report_path + "\n";
  return text;
}

}  // namespace tp
