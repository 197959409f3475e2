#pragma once
// Failure classification for `trainproof drill`: what happened in a launch, decided only from the
// evidence files it left (docs/drills.md, "Faults"): the victim's fired-fault record, the
// heartbeats, the watchdog's abort.json, and the next launch's progress.json. Everything past the
// readers is pure, so it is unit-tested without launching anything.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "app/drill/drill_records.h"
#include "app/drill/drill_supervisor.h"
#include "train/faults.h"
#include "train/heartbeat.h"

namespace tp {

// abort.json, as the watchdog wrote it.
struct AbortRecord {
  std::vector<WatchdogNamedRank> missing;  // the ranks that did not arrive
  std::string text;                        // the whole record as compact JSON, for messages
};

// Everything a failed launch left behind, and what the supervisor saw of it.
struct LaunchEvidence {
  std::vector<FiredFault> fired;
  std::vector<HeartbeatRecord> heartbeats;  // [rank]
  std::optional<AbortRecord> abort;
  std::optional<DrillExternalKill> external_kill;
  int exit_code = -1;
  std::string run_dir;
  double end_unix = 0;
  bool timed_out = false;
};

LaunchEvidence read_launch_evidence(const DrillLaunch& run);
// The progress.json `run` wrote; nullopt when it wrote none.
std::optional<RestoreProgress> read_restore_progress(const DrillLaunch& run);

// nullopt unless `record` is an object.
std::optional<AbortRecord> abort_record_from(const nlohmann::json& record);
std::optional<RestoreProgress> restore_progress_from(const nlohmann::json& progress);

enum class LaunchEnd {
  finished,        // a report with PASS, WARN or FAIL: the drill ends on it
  rejected_input,  // exit 2: relaunching would only be rejected again
  failed,          // anything else: a failure to classify and recover from
};
LaunchEnd launch_end(int exit_code, bool wrote_report);

struct ClassifiedFailure {
  DrillFailure failure;
  std::optional<std::string> problem;  // a hang the watchdog did not name
};
// What struck the launch: the first fired fault (a hang located from abort.json, never from its
// spec), else the drill's own external kill. nullopt when no injected fault explains the failure.
std::optional<ClassifiedFailure> classify_failure(const LaunchEvidence& evidence);

// How the launch after `failure` recovered, from its progress record (nullopt: it left none).
DrillRecovery recovery_from(const DrillFailure& failure,
                            const std::optional<RestoreProgress>& progress,
                            std::optional<int64_t> expected_restored_step);
// Why `failure.recovery` is wrong: no record of a restore, or not the expected checkpoint.
std::optional<std::string> recovery_problem(const DrillFailure& failure,
                                            const std::string& relaunch_dir);

// What a relaunch must restore: the newest committed checkpoint, or the one before it when the
// drill is about to corrupt the newest.
std::optional<int64_t> expected_restore(const std::vector<int64_t>& committed_newest_first,
                                        bool corrupting_newest);

}  // namespace tp
