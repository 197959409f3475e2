#include "app/drill/drill_classify.h"

#include <algorithm>

#include "app/drill/drill_logic.h"
#include "common/errors.h"

namespace tp {
namespace {

using nlohmann::json;

std::optional<int64_t> integer_in(const json& record, const char* key) {
  const auto found = record.find(key);
  if (found == record.end() || !found->is_number()) return std::nullopt;
  return found->get<int64_t>();
}

std::optional<double> number_in(const json& record, const char* key) {
  const auto found = record.find(key);
  if (found == record.end() || !found->is_number()) return std::nullopt;
  return found->get<double>();
}

WatchdogNamedRank named_rank_from(const json& entry) {
  WatchdogNamedRank named;
  named.rank = int(integer_in(entry, "rank").value_or(-1));
  if (entry.contains("host") && entry["host"].is_string()) named.host = entry["host"];
  named.last_step = integer_in(entry, "last_step").value_or(0);
  named.last_phase = entry.value("last_phase", std::string());
  named.last_seen_unix = number_in(entry, "last_seen_unix").value_or(0.0);
  return named;
}

std::string fault_text(const FiredFault& fired) {
  return fired.origin == fired.text ? fired.text : fired.origin + " -> " + fired.text;
}

// A hung or stopped rank is located where the watchdog's evidence puts it, never where its spec
// aimed it.
std::optional<std::string> locate_hang(const FiredFault& fired,
                                       const std::optional<AbortRecord>& abort,
                                       DrillFailure& failure) {
  const std::vector<WatchdogNamedRank> named =
      abort ? abort->missing : std::vector<WatchdogNamedRank>{};
  failure.detected = !named.empty();
  if (!named.empty()) {
    failure.rank = named.front().rank;
    failure.host = named.front().host;
    failure.step = named.front().last_step;
    failure.phase = named.front().last_phase;
  }
  failure.named_by_watchdog = named;
  const bool victim_named = std::any_of(
      named.begin(), named.end(), [&](const auto& entry) { return entry.rank == fired.rank; });
  if (victim_named) return std::nullopt;
  return "the watchdog did not name rank " + std::to_string(fired.rank) +
         (fired.kind == "stop" ? ", which stopped" : ", which hung") +
         " (abort.json: " + (abort ? abort->text : std::string("absent")) + ")";
}

std::optional<std::string> describe_fired(const FiredFault& fired,
                                          const std::optional<AbortRecord>& abort,
                                          DrillFailure& failure) {
  failure.fault = fault_text(fired);
  failure.kind = fired.kind;
  failure.fault_unix = fired.unix_time;
  if (fired.kind == "hang" || fired.kind == "stop") return locate_hang(fired, abort, failure);
  failure.detected = true;
  failure.rank = fired.rank;
  failure.host = fired.host;
  failure.step = fired.step;
  failure.phase = fired.phase;
  return std::nullopt;
}

void describe_external_kill(const DrillExternalKill& kill,
                            const std::vector<HeartbeatRecord>& heartbeats, DrillFailure& failure) {
  const bool node = !kill.node_ranks.empty();
  failure.kind = node ? "external-node" : "external-kill";
  failure.fault = node ? "SIGKILL from the drill of every rank on " + kill.host
                       : std::string("SIGKILL from the drill");
  failure.lost_ranks = kill.node_ranks;
  failure.fault_unix = kill.unix_time;
  failure.detected = true;
  failure.rank = kill.rank;
  failure.host = kill.host;
  if (size_t(kill.rank) < heartbeats.size()) {
    failure.step = heartbeats[size_t(kill.rank)].step;
    failure.phase = heartbeats[size_t(kill.rank)].phase;
  }
}

// Every rank a node fault killed. Two ranks of the node may reach its point together, and a rank
// that could not share its node's memory fires alone: each leaves a record.
std::vector<int> node_ranks_killed(const std::vector<FiredFault>& fired) {
  std::vector<int> ranks;
  for (const FiredFault& record : fired)
    if (record.kind == "node" && record.origin == fired.front().origin)
      ranks.insert(ranks.end(), record.node_ranks.begin(), record.node_ranks.end());
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

}  // namespace

LaunchEvidence read_launch_evidence(const DrillLaunch& run) {
  LaunchEvidence evidence;
  evidence.fired = read_fired_faults(run.heartbeats());
  evidence.heartbeats = Heartbeat::read_all(run.heartbeats(), heartbeat_ranks(run.heartbeats()));
  evidence.abort = abort_record_from(read_json_file(run.heartbeats() + "/abort.json"));
  evidence.external_kill = run.external_kill;
  evidence.exit_code = run.exit_code;
  evidence.run_dir = run.dir;
  evidence.end_unix = run.end_unix;
  evidence.timed_out = run.timed_out;
  return evidence;
}

std::optional<RestoreProgress> read_restore_progress(const DrillLaunch& run) {
  return restore_progress_from(read_json_file(run.heartbeats() + "/progress.json"));
}

std::optional<AbortRecord> abort_record_from(const json& record) {
  if (!record.is_object()) return std::nullopt;
  AbortRecord abort;
  abort.text = record.dump();
  const auto missing = record.find("missing");
  if (missing != record.end() && missing->is_array())
    for (const json& entry : *missing) abort.missing.push_back(named_rank_from(entry));
  return abort;
}

std::optional<RestoreProgress> restore_progress_from(const json& progress) {
  if (!progress.is_object()) return std::nullopt;
  RestoreProgress restore;
  if (const auto size = integer_in(progress, "world_size")) restore.world_size = int(*size);
  restore.restored_step = integer_in(progress, "restored_step");
  restore.restore_gbps = number_in(progress, "restore_gbps");
  restore.first_step_end_unix = number_in(progress, "first_step_end_unix");
  return restore;
}

LaunchEnd launch_end(int exit_code, bool wrote_report) {
  if (exit_code == kExitUsage) return LaunchEnd::rejected_input;
  if (wrote_report && (exit_code == kExitPass || exit_code == kExitFail))
    return LaunchEnd::finished;
  return LaunchEnd::failed;
}

std::optional<ClassifiedFailure> classify_failure(const LaunchEvidence& evidence) {
  ClassifiedFailure classified;
  DrillFailure& failure = classified.failure;
  if (!evidence.fired.empty()) {
    classified.problem = describe_fired(evidence.fired.front(), evidence.abort, failure);
    if (failure.kind == "node") failure.lost_ranks = node_ranks_killed(evidence.fired);
  } else if (evidence.external_kill)
    describe_external_kill(*evidence.external_kill, evidence.heartbeats, failure);
  else
    return std::nullopt;
  failure.last_completed_step = last_completed_step(evidence.heartbeats);
  failure.exit_code = evidence.exit_code;
  failure.run = evidence.run_dir;
  failure.detected_after_s = evidence.end_unix - failure.fault_unix;
  if (evidence.timed_out) {
    // The drill's own timeout ended the launch: the job never noticed the failure itself.
    failure.detected = false;
    failure.timed_out = true;
  }
  return classified;
}

DrillRecovery recovery_from(const DrillFailure& failure,
                            const std::optional<RestoreProgress>& progress,
                            std::optional<int64_t> expected_restored_step) {
  DrillRecovery recovery;
  recovery.expected_restored_step = expected_restored_step;
  if (progress) {
    recovery.recorded = true;
    recovery.restored_step = progress->restored_step;
    recovery.restore_gbps = progress->restore_gbps;
    if (progress->first_step_end_unix)
      recovery.rto_s = *progress->first_step_end_unix - failure.fault_unix;
  }
  // A relaunch that restored nothing started over: everything up to the failure is lost.
  if (failure.last_completed_step)
    recovery.rpo_steps = *failure.last_completed_step - recovery.restored_step.value_or(0);
  return recovery;
}

std::optional<std::string> recovery_problem(const DrillFailure& failure,
                                            const std::string& relaunch_dir) {
  const DrillRecovery recovery = failure.recovery.value_or(DrillRecovery{});
  const std::string after = "the relaunch after " + failure.kind;
  if (!recovery.recorded)
    return after + " left no record of its restore (see " + relaunch_dir + "/output.log)";
  if (recovery.restored_step == recovery.expected_restored_step) return std::nullopt;
  const auto& restored = recovery.restored_step;
  const auto& expected = recovery.expected_restored_step;
  return after + " restored " +
         (restored ? "step " + std::to_string(*restored) : std::string("nothing")) +
         (expected ? "; step " + std::to_string(*expected) + " was the newest valid checkpoint"
                   : std::string("; no valid checkpoint existed"));
}

std::optional<int64_t> expected_restore(const std::vector<int64_t>& committed_newest_first,
                                        bool corrupting_newest) {
  if (committed_newest_first.empty()) return std::nullopt;
  if (!corrupting_newest) return committed_newest_first.front();
  if (committed_newest_first.size() < 2) return std::nullopt;
  return committed_newest_first[1];
}

}  // namespace tp
