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

// The gate's defaults, with accept.time_budget_s of `seconds`.
tp::AcceptConfig budget(double seconds) {
  tp::AcceptConfig config = tp::test::gated({});
  config.time_budget_s = seconds;
  return config;
}

TEST(AcceptProgress, ThePartialReportLiesBesideTheFinalOne) {
  EXPECT_EQ(tp::partial_report_path("out/run.json"), "out/run.partial.json");
  EXPECT_EQ(tp::partial_report_path("run"), "run.partial.json");
  EXPECT_EQ(tp::partial_report_path(".json"), ".json.partial.json");
}

TEST(AcceptProgress, ARunThatCompletedEveryStageIsComplete) {
  const std::vector<StageAttempt> all = every_stage_completed();
  EXPECT_EQ(tp::incomplete_reason(budget(0), all, {}), "");
  // The budget running out after the last stage changes nothing: every stage completed.
  EXPECT_EQ(tp::incomplete_reason(budget(60), all, {tp::kStopBudget, "restore", false, ""}), "");
}

TEST(AcceptProgress, AStopInAStageNamesItAndEveryStageNotCompleted) {
  const std::vector<StageAttempt> attempts = {completed("preflight"), stopped("sweep")};
  EXPECT_EQ(tp::incomplete_reason(budget(0), attempts, {SIGTERM, "sweep", true, ""}),
            "SIGTERM received during stage sweep: every rank stopped at its next stop point; "
            "not completed: sweep, pairwise, train, restore");
  EXPECT_EQ(tp::incomplete_reason(budget(90), attempts, {tp::kStopBudget, "sweep", true, ""}),
            "the time budget (accept.time_budget_s=90) ran out during stage sweep: every rank "
            "stopped at its next stop point; not completed: sweep, pairwise, train, restore");
}

TEST(AcceptProgress, ARetryCutShortLeavesItsStageIncompleteWhateverTheFirstAttemptDid) {
  std::vector<StageAttempt> attempts = every_stage_completed();
  attempts.push_back(stopped("restore"));  // the retry of a restore that failed
  EXPECT_EQ(tp::incomplete_reason(budget(60), attempts, {tp::kStopBudget, "restore", true, ""}),
            "the time budget (accept.time_budget_s=60) ran out during stage restore: every rank "
            "stopped at its next stop point; not completed: restore");
}

TEST(AcceptProgress, ABudgetSpentBetweenStagesNamesTheStageNotStarted) {
  const std::vector<StageAttempt> attempts = {completed("preflight"), completed("sweep"),
                                              completed("pairwise")};
  EXPECT_EQ(tp::incomplete_reason(budget(600), attempts, {tp::kStopBudget, "train", false, ""}),
            "the time budget (accept.time_budget_s=600) ran out before stage train started; "
            "not completed: train, restore");
}

// A stage's own deadline (accept.stage_time_s) is named as such, not as the run's budget.
TEST(AcceptProgress, AStagesOwnDeadlineIsNamed) {
  tp::AcceptConfig config = budget(3600);
  config.stage_time_s = {{"pairwise", 1800}};
  const std::vector<StageAttempt> attempts = {completed("preflight"), completed("sweep"),
                                              stopped("pairwise")};
  AcceptStop stop{tp::kStopBudget, "pairwise", true, "pairwise"};
  EXPECT_EQ(tp::incomplete_reason(config, attempts, stop),
            "stage pairwise's deadline (accept.stage_time_s pairwise=1800) ran out during stage "
            "pairwise: every rank stopped at its next stop point; not completed: pairwise, train, "
            "restore");
  stop.deadline_of = "";
  EXPECT_NE(tp::incomplete_reason(config, attempts, stop)
                .find("the time budget (accept.time_budget_s=3600) ran out during stage pairwise"),
            std::string::npos);
}

TEST(AcceptProgress, ASignalDuringTheLastStageStillMakesTheRunIncomplete) {
  const std::vector<StageAttempt> all = every_stage_completed();
  EXPECT_EQ(tp::incomplete_reason(budget(0), all, {SIGUSR1, "restore", false, ""}),
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
