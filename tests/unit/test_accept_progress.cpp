// How far an acceptance run got: the partial report's path, why a run is INCOMPLETE, and the
// verdict an incomplete run gets (never PASS; FAIL still wins).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "accept_fixtures.h"
#include "app/accept/accept_progress.h"
#include "app/accept/accept_report.h"
#include "app/report/gate.h"
#include "common/errors.h"
#include "train/preemption.h"

namespace {

using nlohmann::json;
using tp::AcceptStop;
using tp::StageAttempt;

StageAttempt completed(const std::string& stage) {
  StageAttempt a;
  a.stage = stage;
  a.checks = json::array({tp::gate_check(stage + "_ok", 1, 1, "pass", "fine")});
  return a;
}

std::vector<StageAttempt> every_stage_completed() {
  std::vector<StageAttempt> all;
  for (const std::string& stage : tp::kAcceptStages) all.push_back(completed(stage));
  return all;
}

StageAttempt stopped(const std::string& stage) {
  StageAttempt a = completed(stage);
  a.stopped = true;
  return a;
}

TEST(AcceptProgress, ThePartialReportLiesBesideTheFinalOne) {
  EXPECT_EQ(tp::partial_report_path("out/run.json"), "out/run.partial.json");
  EXPECT_EQ(tp::partial_report_path("run"), "run.partial.json");
  EXPECT_EQ(tp::partial_report_path(".json"), ".json.partial.json");
}

TEST(AcceptProgress, ARunThatCompletedEveryStageIsComplete) {
  const tp::AcceptConfig config = tp::test::gated({});
  const std::vector<StageAttempt> all = every_stage_completed();
  EXPECT_EQ(tp::incomplete_reason(config, all, {}, 0), "");
  // The budget running out after the last stage changes nothing: every stage completed.
  EXPECT_EQ(tp::incomplete_reason(config, all, {tp::kStopBudget, "restore", false}, 60), "");
}

TEST(AcceptProgress, AStopInAStageNamesItAndEveryStageNotCompleted) {
  const tp::AcceptConfig config = tp::test::gated({});
  const std::vector<StageAttempt> attempts = {completed("preflight"), stopped("sweep")};
  EXPECT_EQ(tp::incomplete_reason(config, attempts, {SIGTERM, "sweep", true}, 0),
            "SIGTERM received during stage sweep: every rank stopped at its next stop point; "
            "not completed: sweep, pairwise, train, restore");
  EXPECT_EQ(tp::incomplete_reason(config, attempts, {tp::kStopBudget, "sweep", true}, 90),
            "the time budget (accept.time_budget_s=90) ran out during stage sweep: every rank "
            "stopped at its next stop point; not completed: sweep, pairwise, train, restore");
}

TEST(AcceptProgress, ARetryCutShortLeavesItsStageIncompleteWhateverTheFirstAttemptDid) {
  const tp::AcceptConfig config = tp::test::gated({});
  std::vector<StageAttempt> attempts = every_stage_completed();
  attempts.push_back(stopped("restore"));  // the retry of a restore that failed
  EXPECT_EQ(tp::incomplete_reason(config, attempts, {tp::kStopBudget, "restore", true}, 60),
            "the time budget (accept.time_budget_s=60) ran out during stage restore: every rank "
            "stopped at its next stop point; not completed: restore");
}

TEST(AcceptProgress, ABudgetSpentBetweenStagesNamesTheStageNotStarted) {
  const tp::AcceptConfig config = tp::test::gated({});
  const std::vector<StageAttempt> attempts = {completed("preflight"), completed("sweep"),
                                              completed("pairwise")};
  EXPECT_EQ(tp::incomplete_reason(config, attempts, {tp::kStopBudget, "train", false}, 600),
            "the time budget (accept.time_budget_s=600) ran out before stage train started; "
            "not completed: train, restore");
}

TEST(AcceptProgress, ASignalDuringTheLastStageStillMakesTheRunIncomplete) {
  const tp::AcceptConfig config = tp::test::gated({});
  const std::vector<StageAttempt> all = every_stage_completed();
  EXPECT_EQ(tp::incomplete_reason(config, all, {SIGUSR1, "restore", false}, 0),
            "SIGUSR1 received during stage restore, which finished: a run asked to stop is not "
            "judged as one left alone");
}

TEST(AcceptProgress, AnIncompleteRunIsNeverPassAndAFailureStillWins) {
  const tp::AcceptConfig config = tp::test::gated({});
  const std::vector<StageAttempt> attempts = {completed("preflight"), stopped("sweep")};
  const std::string why = "SIGTERM received during stage sweep";
  const json report =
      tp::accept_report(config, attempts, json::object(), json::object(), nullptr, why);
  EXPECT_EQ(report["verdict"], "INCOMPLETE");
  EXPECT_EQ(report["accept"]["incomplete"], why);
  EXPECT_EQ(report["accept"]["attempts"][1]["stopped"], true);
  EXPECT_EQ(tp::exit_code_for("INCOMPLETE"), tp::kExitFail);

  std::vector<StageAttempt> failing = attempts;
  failing[0].checks.push_back(tp::gate_check("folder_probe", 1, 0, "fail", "a rank failed"));
  EXPECT_EQ(
      tp::accept_report(config, failing, json::object(), json::object(), nullptr, why)["verdict"],
      "FAIL");
  EXPECT_EQ(tp::verdict_of_checks(
                json::array({tp::gate_check("a", 1, 1, "warn", "w"),
                             tp::gate_check("run_complete", nullptr, nullptr, "incomplete", why)})),
            "INCOMPLETE");
}

TEST(AcceptProgress, ThePartialReportNamesTheRunningStage) {
  const std::string path =
      (std::filesystem::path(::testing::TempDir()) / "progress-run.json").string();
  const tp::AcceptConfig config = tp::test::gated({});
  tp::write_partial_report(path,
                           tp::accept_report(config, {completed("preflight")}, json::object(),
                                             json::object(), nullptr, "partial report"),
                           "sweep");
  std::ifstream in(tp::partial_report_path(path));
  const json partial = json::parse(in);
  EXPECT_EQ(partial["accept"]["partial"]["running"], "sweep");
  EXPECT_EQ(partial["verdict"], "INCOMPLETE");
  EXPECT_FALSE(std::filesystem::exists(path)) << "a partial report took the final one's place";
}

}  // namespace
