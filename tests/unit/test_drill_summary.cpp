#include <gtest/gtest.h>

#include "app/drill/drill_summary.h"
#include "app/report/report.h"

namespace {

using nlohmann::json;

tp::DrillFailure kill_at_step_12() {
  tp::DrillFailure failure;
  failure.kind = "kill";
  failure.fault = "kill:rank=1,step=12,phase=compute";
  failure.fault_unix = 1000.5;
  failure.detected = true;
  failure.rank = 1;
  failure.host = "node07";
  failure.step = 12;
  failure.phase = "compute";
  failure.last_completed_step = 11;
  failure.exit_code = 137;
  failure.run = "/ckpt/drill-x/run-0";
  failure.detected_after_s = 2.031;
  tp::DrillRecovery recovery;
  recovery.recorded = true;
  recovery.restored_step = 5;
  recovery.expected_restored_step = 5;
  recovery.restore_gbps = 1.5;
  recovery.rto_s = 5.65;
  recovery.rpo_steps = 6;
  failure.recovery = recovery;
  return failure;
}

// A hang that only the drill's run timeout ended: nothing named a rank.
tp::DrillFailure unnamed_hang() {
  tp::DrillFailure failure;
  failure.kind = "hang";
  failure.fault = "hang:rank=1,step=6";
  failure.fault_unix = 2000.0;
  failure.timed_out = true;
  failure.named_by_watchdog = std::vector<tp::WatchdogNamedRank>{};
  failure.last_completed_step = 5;
  failure.exit_code = 143;
  failure.run = "/ckpt/drill-x/run-1";
  failure.detected_after_s = 4.654;
  return failure;
}

tp::DrillResult passed_drill() {
  tp::DrillResult result;
  result.launcher = "mpirun -np 2";
  result.folder = "/ckpt/drill-x";
  result.seed = 12969560182361ULL;
  result.failures = {kill_at_step_12()};
  result.corruptions = {{"corrupt:shard=1,mode=flip", "/ckpt/drill-x/faulted/step-00000010",
                         "/ckpt/drill-x/faulted/step-00000010/rank-00001.h5"}};
  result.restarts = 1;
  result.reference_digest = "b27e1cf8";
  result.final_digest = "b27e1cf8";
  result.digest_match = true;
  result.runs = {{"run-0", 137, "/ckpt/drill-x/run-0"}, {"run-1", 0, "/ckpt/drill-x/run-1"}};
  result.rpo_steps = 6;
  result.rpo_s = 0.5;
  result.rto_s = 5.65;
  result.redone_step_seconds = 0.5;
  result.verdict = "PASS";
  return result;
}

TEST(DrillSummary, FailureRecordHasEveryFieldWithItsValue) {
  const json expected = json::parse(R"({
    "kind": "kill", "fault": "kill:rank=1,step=12,phase=compute", "fault_unix": 1000.5,
    "detected": true, "rank": 1, "host": "node07", "step": 12, "phase": "compute",
    "last_completed_step": 11, "exit_code": 137, "run": "/ckpt/drill-x/run-0",
    "detected_after_s": 2.031, "restored_step": 5, "expected_restored_step": 5,
    "restore_gbps": 1.5, "rto_s": 5.65, "rpo_steps": 6})");
  EXPECT_EQ(tp::failure_json(kill_at_step_12()), expected);
}

TEST(DrillSummary, UnlocatedHangRecordKeepsItsNullsAndTimeout) {
  const json expected = json::parse(R"({
    "kind": "hang", "fault": "hang:rank=1,step=6", "fault_unix": 2000.0, "detected": false,
    "timed_out": true, "rank": null, "host": null, "step": null, "phase": null,
    "named_by_watchdog": [], "last_completed_step": 5, "exit_code": 143,
    "run": "/ckpt/drill-x/run-1", "detected_after_s": 4.654})");
  EXPECT_EQ(tp::failure_json(unnamed_hang()), expected);
}

TEST(DrillSummary, NamedRanksAndAnUnrecordedRestoreAreFormatted) {
  tp::DrillFailure failure = unnamed_hang();
  failure.named_by_watchdog->push_back({1, std::nullopt, 6, "none", 0.0});
  failure.recovery = tp::DrillRecovery{};  // the relaunch left no progress record
  const json record = tp::failure_json(failure);
  EXPECT_EQ(record["named_by_watchdog"],
            json::parse(R"([{"rank": 1, "host": null, "last_step": 6, "last_phase": "none",
                             "last_seen_unix": 0.0}])"));
  EXPECT_EQ(record["restored_step"], nullptr);
  EXPECT_EQ(record["expected_restored_step"], nullptr);
  EXPECT_FALSE(record.contains("restore_gbps"));
  EXPECT_FALSE(record.contains("rto_s"));
  EXPECT_FALSE(record.contains("rpo_steps"));
}

TEST(DrillSummary, DrillSectionHasEveryFieldWithItsValue) {
  const json section = tp::drill_json(passed_drill());
  EXPECT_EQ(section.size(), 17u);
  EXPECT_EQ(section["launcher"], "mpirun -np 2");
  EXPECT_EQ(section["proof_not_applicable"], nullptr);
  EXPECT_EQ(section["folder"], "/ckpt/drill-x");
  EXPECT_EQ(section["seed"], 12969560182361ULL);
  EXPECT_EQ(section["failures"], json::array({tp::failure_json(kill_at_step_12())}));
  EXPECT_EQ(section["corruptions"], json::parse(R"([{"fault": "corrupt:shard=1,mode=flip",
                             "folder": "/ckpt/drill-x/faulted/step-00000010",
                             "file": "/ckpt/drill-x/faulted/step-00000010/rank-00001.h5"}])"));
  EXPECT_EQ(section["restarts"], 1);
  EXPECT_EQ(section["reference_digest"], "b27e1cf8");
  EXPECT_EQ(section["final_digest"], "b27e1cf8");
  EXPECT_EQ(section["digest_match"], true);
  EXPECT_EQ(section["runs"], json::parse(R"([{"name": "run-0", "exit_code": 137,
                                             "dir": "/ckpt/drill-x/run-0"},
                                            {"name": "run-1", "exit_code": 0,
                                             "dir": "/ckpt/drill-x/run-1"}])"));
  EXPECT_EQ(section["problems"], json::array());
  EXPECT_EQ(section["rpo_steps"], 6);
  EXPECT_EQ(section["rpo_s"], 0.5);
  EXPECT_EQ(section["rto_s"], 5.65);
  EXPECT_EQ(section["redone_step_seconds"], 0.5);
  EXPECT_EQ(section["verdict"], "PASS");
}

TEST(DrillSummary, DrillSectionWithoutFailuresHasNullRpoAndRto) {
  tp::DrillResult result = passed_drill();
  result.failures.clear();
  result.rpo_steps.reset();
  result.rpo_s.reset();
  result.rto_s.reset();
  const json section = tp::drill_json(result);
  EXPECT_EQ(section["failures"], json::array());
  EXPECT_EQ(section["rpo_steps"], nullptr);
  EXPECT_EQ(section["rpo_s"], nullptr);
  EXPECT_EQ(section["rto_s"], nullptr);
}

TEST(DrillSummary, ReportExtendsTheFinalRunsReportAndKeepsItsWarn) {
  const json final_report = json::parse(R"({"schema": "old", "verdict": "WARN",
      "train": {"final_digest": "b27e1cf8"}, "context": {"host": "node03"},
      "gate": {"checks": [{"name": "straggler", "status": "warn"}]}})");
  const json report = tp::drill_report(
      final_report, passed_drill(), tp::DrillContext{"run-7", "t0", "t1", {"trainproof", "drill"}});
  EXPECT_EQ(report["schema"], tp::kReportSchema);
  EXPECT_EQ(report["verdict"], "WARN");
  EXPECT_EQ(report["train"]["final_digest"], "b27e1cf8");
  EXPECT_EQ(report["context"]["host"], "node03");
  EXPECT_EQ(report["context"]["run_id"], "run-7") << "the drill's own, not its last run's";
  EXPECT_EQ(report["context"]["drill"], json::parse(R"({"started": "t0", "ended": "t1",
                            "command_line": ["trainproof", "drill"]})"));
  EXPECT_EQ(report["drill"], tp::drill_json(passed_drill()));
  ASSERT_EQ(report["gate"]["checks"].size(), 2u);
  EXPECT_EQ(report["gate"]["checks"][1],
            (json{{"name", "drill"},
                  {"value", "PASS"},
                  {"threshold", "digest match, every failure detected and restored"},
                  {"status", "pass"},
                  {"reason", "final digest matches the reference after 1 failure(s)"}}));
}

TEST(DrillSummary, FailedDrillReportStandsAloneWithTheFirstProblemAsReason) {
  tp::DrillResult result = passed_drill();
  result.problems = {"first problem", "second problem"};
  result.verdict = "FAIL";
  const json report = tp::drill_report(nullptr, result, tp::DrillContext{});
  EXPECT_EQ(report["verdict"], "FAIL");
  EXPECT_FALSE(report.contains("train"));
  ASSERT_EQ(report["gate"]["checks"].size(), 1u);
  EXPECT_EQ(report["gate"]["checks"][0]["status"], "fail");
  EXPECT_EQ(report["gate"]["checks"][0]["value"], "FAIL");
  EXPECT_EQ(report["gate"]["checks"][0]["reason"], "first problem");
}

TEST(DrillSummary, ReportRedactsTheLauncherAndCanAlwaysBeWritten) {
  tp::DrillResult result = passed_drill();
  result.launcher = "env HF_TOKEN=hf_secret mpirun -np 2";
  result.folder = "/ckpt/r\xe9sum\xe9/drill-x";
  result.problems = {"run-0 failed: curl https://u:hf_pass@host"};
  const json report = tp::drill_report(
      nullptr, result,
      tp::DrillContext{
          "run-7", "t0", "t1", {"trainproof", "drill", "--launcher", result.launcher}});
  std::string text;
  ASSERT_NO_THROW(text = report.dump());
  EXPECT_EQ(text.find("hf_secret"), std::string::npos) << text;
  EXPECT_EQ(text.find("hf_pass"), std::string::npos) << text;
  EXPECT_EQ(report["drill"]["launcher"], "env HF_TOKEN=<redacted> mpirun -np 2");
  EXPECT_EQ(report["context"]["drill"]["command_line"][3], "env HF_TOKEN=<redacted> mpirun -np 2");
  EXPECT_EQ(report["drill"]["folder"], "/ckpt/r\\xE9sum\\xE9/drill-x");
  EXPECT_EQ(report["context"]["escaped_strings"], json({"/drill/folder"}));
  EXPECT_EQ(tp::drill_summary(result, "r.json").find("hf_pass"), std::string::npos);
}

TEST(DrillSummary, FiredLineSaysWhereAndHowFastTheLauncherExited) {
  EXPECT_EQ(tp::fired_line(kill_at_step_12()),
            "drill: kill:rank=1,step=12,phase=compute fired on rank 1, step 12 compute; "
            "launcher exited 137 after 2.03 s\n");
  EXPECT_EQ(tp::fired_line(unnamed_hang()),
            "drill: hang:rank=1,step=6 fired on rank null, step null null; "
            "launcher exited 143 after 4.65 s\n");
}

TEST(DrillSummary, FailureLinesAlignAndShowNulls) {
  EXPECT_EQ(tp::failure_line(kill_at_step_12()),
            "kill         rank 1 on node07, step 12 compute: detected after 2.03 s; restored 5");
  tp::DrillFailure hang = unnamed_hang();
  EXPECT_EQ(tp::failure_line(hang),
            "hang         rank null on null, step null null: NOT DETECTED after 4.65 s; "
            "restored null");
  hang.kind = "external-kill";
  EXPECT_EQ(tp::failure_line(hang).substr(0, 19), "external-kill rank ");
}

TEST(DrillSummary, SummaryTextOfAPassedDrill) {
  EXPECT_EQ(tp::drill_summary(passed_drill(), "/runs/drill.json"),
            "\n"
            "drill summary (/ckpt/drill-x)\n"
            "  kill         rank 1 on node07, step 12 compute: detected after 2.03 s; restored 5\n"
            "  corrupt    corrupt:shard=1,mode=flip -> "
            "/ckpt/drill-x/faulted/step-00000010/rank-00001.h5\n"
            "  restarts 1; RPO 6 steps (0.5 s); RTO 5.65 s\n"
            "  digest: reference b27e1cf8, final b27e1cf8: MATCH\n"
            "drill verdict: PASS\n"
            "report: /runs/drill.json\n");
}

// RPO and RTO as measured (a sum of step times, a difference of clocks) carry every digit a
// double has; a person reads three.
TEST(DrillSummary, RecoveryFiguresReadAsAPersonReadsThem) {
  tp::DrillResult result = passed_drill();
  result.rpo_s = 0.0008107049999999999;
  result.rto_s = 6.231903791427612;
  const std::string text = tp::drill_summary(result, "/runs/drill.json");
  EXPECT_NE(text.find("  restarts 1; RPO 6 steps (0.000811 s); RTO 6.23 s\n"), std::string::npos)
      << text;
}

TEST(DrillSummary, SummaryTextOfADrillThatNeverFinished) {
  tp::DrillResult result;
  result.folder = "/ckpt/drill-y";
  result.reference_digest = "b27e1cf8";
  result.problems = {"run-0 rejected its input (exit 2), so it is not relaunched: bad\n",
                     "the drill never finished a run"};
  result.redone_step_seconds = 0.0;
  result.verdict = "FAIL";
  EXPECT_EQ(tp::drill_summary(result, "/runs/drill.json"),
            "\n"
            "drill summary (/ckpt/drill-y)\n"
            "  no failures injected\n"
            "  restarts 0; RPO n/a; RTO n/a\n"
            "  digest: reference b27e1cf8, final none: DIFFER\n"
            "  problem: run-0 rejected its input (exit 2), so it is not relaunched: bad\n\n"
            "  problem: the drill never finished a run\n"
            "drill verdict: FAIL\n"
            "report: /runs/drill.json\n");
}

}  // namespace
