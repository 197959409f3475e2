#include <gtest/gtest.h>

#include "app/drill/drill_classify.h"

namespace {

tp::HeartbeatRecord beat_on_host(int rank, int64_t step, const char* phase) {
  tp::HeartbeatRecord record;
  record.rank = rank;
  record.step = step;
  record.phase = phase;
  record.host = "node0" + std::to_string(rank);
  record.present = true;
  return record;
}

tp::FiredFault fired(const char* kind, int rank, int64_t step, const char* phase) {
  tp::FiredFault record;
  record.kind = kind;
  record.rank = rank;
  record.step = step;
  record.phase = phase;
  record.host = "node07";
  record.text =
      std::string(kind) + ":rank=" + std::to_string(rank) + ",step=" + std::to_string(step);
  record.origin = record.text;
  record.unix_time = 100.0;
  return record;
}

// A two-rank launch that died at step 10: rank 1 in compute, rank 0 waiting in comm.
tp::LaunchEvidence died_at_step_10() {
  tp::LaunchEvidence evidence;
  evidence.heartbeats = {beat_on_host(0, 10, "comm"), beat_on_host(1, 10, "compute")};
  evidence.exit_code = 137;
  evidence.run_dir = "/drill/run-0";
  evidence.end_unix = 102.5;
  return evidence;
}

tp::AbortRecord abort_naming(int rank, int64_t last_step, const char* last_phase) {
  tp::AbortRecord abort;
  abort.missing.push_back({rank, std::string("node09"), last_step, last_phase, 99.0});
  abort.text = R"({"missing":[...]})";
  return abort;
}

TEST(DrillClassify, KillIsLocatedFromItsFiredRecord) {
  tp::LaunchEvidence evidence = died_at_step_10();
  evidence.fired = {fired("kill", 1, 10, "compute")};
  const auto classified = tp::classify_failure(evidence);
  ASSERT_TRUE(classified.has_value());
  const tp::DrillFailure& failure = classified->failure;
  EXPECT_EQ(failure.kind, "kill");
  EXPECT_EQ(failure.fault, "kill:rank=1,step=10");
  EXPECT_TRUE(failure.detected);
  EXPECT_FALSE(failure.timed_out);
  EXPECT_EQ(failure.rank, 1);
  EXPECT_EQ(failure.host, "node07");
  EXPECT_EQ(failure.step, 10);
  EXPECT_EQ(failure.phase, "compute");
  EXPECT_EQ(failure.last_completed_step, 9);
  EXPECT_EQ(failure.exit_code, 137);
  EXPECT_EQ(failure.run, "/drill/run-0");
  EXPECT_DOUBLE_EQ(failure.fault_unix, 100.0);
  EXPECT_DOUBLE_EQ(failure.detected_after_s, 2.5);
  EXPECT_FALSE(failure.named_by_watchdog.has_value());
  EXPECT_FALSE(failure.recovery.has_value());
  EXPECT_FALSE(classified->problem.has_value());
}

TEST(DrillClassify, DrawnFaultShowsItsSeedAndWhatItDrew) {
  tp::LaunchEvidence evidence = died_at_step_10();
  tp::FiredFault drawn = fired("kill", 1, 10, "optimizer");
  drawn.origin = "random:seed=3";
  drawn.text = "kill:rank=1,step=10,phase=optimizer";
  evidence.fired = {drawn};
  EXPECT_EQ(tp::classify_failure(evidence)->failure.fault,
            "random:seed=3 -> kill:rank=1,step=10,phase=optimizer");
}

TEST(DrillClassify, HangIsLocatedWhereTheWatchdogSawItNotWhereTheSpecAimed) {
  tp::LaunchEvidence evidence = died_at_step_10();
  evidence.fired = {fired("hang", 1, 6, "compute")};
  evidence.abort = abort_naming(1, 5, "optimizer");
  const auto classified = tp::classify_failure(evidence);
  ASSERT_TRUE(classified.has_value());
  const tp::DrillFailure& failure = classified->failure;
  EXPECT_TRUE(failure.detected);
  EXPECT_EQ(failure.rank, 1);
  EXPECT_EQ(failure.host, "node09");  // the abort record's, not the fired record's node07
  EXPECT_EQ(failure.step, 5);
  EXPECT_EQ(failure.phase, "optimizer");
  ASSERT_TRUE(failure.named_by_watchdog.has_value());
  ASSERT_EQ(failure.named_by_watchdog->size(), 1u);
  EXPECT_EQ(failure.named_by_watchdog->front().rank, 1);
  EXPECT_FALSE(classified->problem.has_value());
}

TEST(DrillClassify, HangBlamedOnAnotherRankIsAProblem) {
  tp::LaunchEvidence evidence = died_at_step_10();
  evidence.fired = {fired("hang", 1, 6, "compute")};
  evidence.abort = abort_naming(0, 5, "comm");
  const auto classified = tp::classify_failure(evidence);
  ASSERT_TRUE(classified.has_value());
  EXPECT_EQ(classified->failure.rank, 0);
  EXPECT_EQ(classified->problem,
            "the watchdog did not name rank 1, which hung (abort.json: {\"missing\":[...]})");
}

// A stopped rank, like a hung one, is located by the watchdog, which must name it.
TEST(DrillClassify, StopBlamedOnAnotherRankIsAProblem) {
  tp::LaunchEvidence evidence = died_at_step_10();
  evidence.fired = {fired("stop", 1, 6, "comm")};
  evidence.abort = abort_naming(0, 5, "comm");
  const auto classified = tp::classify_failure(evidence);
  ASSERT_TRUE(classified.has_value());
  EXPECT_EQ(classified->failure.rank, 0);
  EXPECT_EQ(classified->problem,
            "the watchdog did not name rank 1, which stopped (abort.json: {\"missing\":[...]})");
}

TEST(DrillClassify, HangWithoutAnAbortRecordIsUndetectedAndUnlocated) {
  tp::LaunchEvidence evidence = died_at_step_10();
  evidence.fired = {fired("hang", 1, 6, "compute")};
  const auto classified = tp::classify_failure(evidence);
  ASSERT_TRUE(classified.has_value());
  const tp::DrillFailure& failure = classified->failure;
  EXPECT_FALSE(failure.detected);
  EXPECT_FALSE(failure.rank.has_value());
  EXPECT_FALSE(failure.host.has_value());
  EXPECT_FALSE(failure.step.has_value());
  EXPECT_FALSE(failure.phase.has_value());
  ASSERT_TRUE(failure.named_by_watchdog.has_value());
  EXPECT_TRUE(failure.named_by_watchdog->empty());
  EXPECT_EQ(classified->problem,
            "the watchdog did not name rank 1, which hung (abort.json: absent)");
}

TEST(DrillClassify, ALaunchTheDrillHadToEndWasNotDetected) {
  tp::LaunchEvidence evidence = died_at_step_10();
  evidence.fired = {fired("kill", 1, 10, "compute")};
  evidence.timed_out = true;
  const tp::DrillFailure failure = tp::classify_failure(evidence)->failure;
  EXPECT_FALSE(failure.detected);
  EXPECT_TRUE(failure.timed_out);
}

TEST(DrillClassify, ExternalKillIsLocatedFromTheVictimsHeartbeat) {
  tp::LaunchEvidence evidence = died_at_step_10();
  evidence.external_kill = tp::DrillExternalKill{101.0, 0, "node03", {}};
  const auto classified = tp::classify_failure(evidence);
  ASSERT_TRUE(classified.has_value());
  const tp::DrillFailure& failure = classified->failure;
  EXPECT_EQ(failure.kind, "external-kill");
  EXPECT_EQ(failure.fault, "SIGKILL from the drill");
  EXPECT_TRUE(failure.detected);
  EXPECT_EQ(failure.rank, 0);
  EXPECT_EQ(failure.host, "node03");
  EXPECT_EQ(failure.step, 10);
  EXPECT_EQ(failure.phase, "comm");
  EXPECT_DOUBLE_EQ(failure.detected_after_s, 1.5);
}

TEST(DrillClassify, ExternalKillOfARankWithoutHeartbeatHasNoStep) {
  tp::LaunchEvidence evidence = died_at_step_10();
  evidence.external_kill = tp::DrillExternalKill{101.0, 5, "node03", {}};
  const tp::DrillFailure failure = tp::classify_failure(evidence)->failure;
  EXPECT_EQ(failure.rank, 5);
  EXPECT_FALSE(failure.step.has_value());
  EXPECT_FALSE(failure.phase.has_value());
}

TEST(DrillClassify, AFiredFaultExplainsTheFailureBeforeAnExternalKill) {
  tp::LaunchEvidence evidence = died_at_step_10();
  evidence.fired = {fired("kill", 1, 10, "compute")};
  evidence.external_kill = tp::DrillExternalKill{101.0, 0, "node03", {}};
  EXPECT_EQ(tp::classify_failure(evidence)->failure.kind, "kill");
}

TEST(DrillClassify, AFailureNoInjectedFaultExplainsIsNotClassified) {
  EXPECT_FALSE(tp::classify_failure(died_at_step_10()).has_value());
}

TEST(DrillClassify, HowALaunchEnded) {
  EXPECT_EQ(tp::launch_end(2, true), tp::LaunchEnd::rejected_input);
  EXPECT_EQ(tp::launch_end(2, false), tp::LaunchEnd::rejected_input);
  EXPECT_EQ(tp::launch_end(0, true), tp::LaunchEnd::finished);
  EXPECT_EQ(tp::launch_end(1, true), tp::LaunchEnd::finished);
  EXPECT_EQ(tp::launch_end(0, false), tp::LaunchEnd::failed);
  EXPECT_EQ(tp::launch_end(3, true), tp::LaunchEnd::failed);
  EXPECT_EQ(tp::launch_end(137, false), tp::LaunchEnd::failed);
}

tp::DrillFailure failed_after_step(int64_t last_completed) {
  tp::DrillFailure failure;
  failure.kind = "kill";
  failure.fault_unix = 100.0;
  failure.last_completed_step = last_completed;
  return failure;
}

TEST(DrillClassify, RecoveryMeasuresRpoAndRtoFromTheRelaunchsProgress) {
  tp::DrillFailure failure = failed_after_step(9);
  const tp::RestoreProgress progress{8, 1.25, 103.5, 4};
  failure.recovery = tp::recovery_from(failure, progress, 8);
  const tp::DrillRecovery& recovery = *failure.recovery;
  EXPECT_TRUE(recovery.recorded);
  EXPECT_EQ(recovery.restored_step, 8);
  EXPECT_EQ(recovery.expected_restored_step, 8);
  EXPECT_EQ(recovery.restore_gbps, 1.25);
  EXPECT_EQ(recovery.rto_s, 3.5);
  EXPECT_EQ(recovery.rpo_steps, 1);
  EXPECT_FALSE(tp::recovery_problem(failure, "/drill/run-1").has_value());
}

TEST(DrillClassify, ARelaunchThatStartedOverLosesEveryCompletedStep) {
  tp::DrillFailure failure = failed_after_step(3);
  failure.recovery = tp::recovery_from(failure, tp::RestoreProgress{}, std::nullopt);
  EXPECT_EQ(failure.recovery->rpo_steps, 3);
  EXPECT_FALSE(failure.recovery->rto_s.has_value());  // it never completed a step
  EXPECT_FALSE(tp::recovery_problem(failure, "/drill/run-1").has_value());
}

TEST(DrillClassify, ARelaunchWithoutProgressRecordIsAProblem) {
  tp::DrillFailure failure = failed_after_step(9);
  failure.recovery = tp::recovery_from(failure, std::nullopt, 8);
  EXPECT_FALSE(failure.recovery->recorded);
  EXPECT_FALSE(failure.recovery->restored_step.has_value());
  EXPECT_EQ(failure.recovery->rpo_steps, 9);
  EXPECT_EQ(tp::recovery_problem(failure, "/drill/run-1"),
            "the relaunch after kill left no record of its restore (see /drill/run-1/output.log)");
}

TEST(DrillClassify, RestoringAnythingButTheNewestValidCheckpointIsAProblem) {
  tp::DrillFailure failure = failed_after_step(9);
  const auto problem_when = [&](std::optional<int64_t> restored, std::optional<int64_t> expected) {
    failure.recovery =
        tp::recovery_from(failure, tp::RestoreProgress{restored, {}, {}, {}}, expected);
    return tp::recovery_problem(failure, "/drill/run-1");
  };
  EXPECT_EQ(problem_when(4, 8),
            "the relaunch after kill restored step 4; step 8 was the newest valid checkpoint");
  EXPECT_EQ(problem_when(std::nullopt, 4),
            "the relaunch after kill restored nothing; step 4 was the newest valid checkpoint");
  EXPECT_EQ(problem_when(8, std::nullopt),
            "the relaunch after kill restored step 8; no valid checkpoint existed");
  EXPECT_FALSE(problem_when(std::nullopt, std::nullopt).has_value());
}

TEST(DrillClassify, ExpectedRestoreSkipsTheCheckpointAboutToBeCorrupted) {
  EXPECT_EQ(tp::expected_restore({12, 8, 4}, false), 12);
  EXPECT_EQ(tp::expected_restore({12, 8, 4}, true), 8);
  EXPECT_FALSE(tp::expected_restore({4}, true).has_value());
  EXPECT_FALSE(tp::expected_restore({}, false).has_value());
}

TEST(DrillClassify, AbortRecordIsReadIntoTypedRanks) {
  const nlohmann::json record = nlohmann::json::parse(R"({
    "reason": "timeout", "missing": [
      {"rank": 1, "host": "node07", "last_step": 27, "last_phase": "comm", "last_seen_unix": 5.5},
      {"rank": 3, "host": null, "last_step": 0, "last_phase": "none", "last_seen_unix": 0.0}]})");
  const auto abort = tp::abort_record_from(record);
  ASSERT_TRUE(abort.has_value());
  ASSERT_EQ(abort->missing.size(), 2u);
  EXPECT_EQ(abort->missing[0].rank, 1);
  EXPECT_EQ(abort->missing[0].host, "node07");
  EXPECT_EQ(abort->missing[0].last_step, 27);
  EXPECT_EQ(abort->missing[0].last_phase, "comm");
  EXPECT_DOUBLE_EQ(abort->missing[0].last_seen_unix, 5.5);
  EXPECT_EQ(abort->missing[1].rank, 3);
  EXPECT_FALSE(abort->missing[1].host.has_value());
  EXPECT_EQ(abort->text, record.dump());
  EXPECT_FALSE(tp::abort_record_from(nullptr).has_value());
  EXPECT_FALSE(tp::abort_record_from(nlohmann::json::array()).has_value());
}

TEST(DrillClassify, ProgressRecordIsReadWithItsNulls) {
  const auto restored = tp::restore_progress_from(nlohmann::json::parse(
      R"({"restored_step": 8, "restore_seconds": 0.1, "restore_gbps": 2.5,
          "first_step_end_unix": 1234.5})"));
  ASSERT_TRUE(restored.has_value());
  EXPECT_EQ(restored->restored_step, 8);
  EXPECT_EQ(restored->restore_gbps, 2.5);
  EXPECT_EQ(restored->first_step_end_unix, 1234.5);
  const auto fresh = tp::restore_progress_from(nlohmann::json::parse(
      R"({"restored_step": null, "restore_gbps": null, "first_step_end_unix": null})"));
  ASSERT_TRUE(fresh.has_value());
  EXPECT_FALSE(fresh->restored_step.has_value());
  EXPECT_FALSE(fresh->restore_gbps.has_value());
  EXPECT_FALSE(fresh->first_step_end_unix.has_value());
  EXPECT_FALSE(tp::restore_progress_from(nullptr).has_value());
}

}  // namespace
