#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "app/accept/accept_config.h"
#include "app/accept/accept_report.h"
#include "app/accept/accept_restore.h"
#include "app/cli/cli.h"
#include "app/cli/cli_options.h"
#include "app/job/job_report.h"
#include "app/judge/gate_judge.h"
#include "app/report/gate.h"
#include "common/errors.h"
#include "tests/unit/accept_fixtures.h"

namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;
namespace po = boost::program_options;

using Sources = std::map<std::string, std::string>;

using namespace tp::test;  // NOLINT(google-build-using-namespace): the fixtures of these tests

// accept_report, add_sections

tp::StageAttempt attempt(const std::string& stage, int number, json sections, json checks) {
  tp::StageAttempt a;
  a.stage = stage;
  a.attempt = number;
  a.sections = std::move(sections);
  a.checks = std::move(checks);
  return a;
}

json passing(const std::string& name) {
  return tp::gate_check(name, 0, 0, "pass", "fine");
}
json failing(const std::string& name) {
  return tp::gate_check(name, 1, 0, "fail", "broken");
}

tp::AcceptConfig preflight_and_train() {
  tp::AcceptConfig c;
  c.stages = {"preflight", "train"};
  c.thresholds = {kMinAu};
  c.retries = 1;
  return c;
}

// An attempt whose own checks pass but whose threshold fails was a failed attempt: the history
// says FAIL, as the retry it caused does.
TEST(AcceptReport, AnAttemptThatMissedAThresholdIsRecordedAsFailed) {
  const tp::AcceptConfig config = preflight_and_train();
  const json partial = {{"train", {{"au", 0.3}}}};
  tp::StageAttempt first =
      attempt("train", 1, {{"train", {{"au", 0.3}}}}, json::array({passing("final_digest")}));
  first.threshold_checks = tp::stage_threshold_checks(config, "train", partial, 1);
  ASSERT_EQ(first.threshold_checks.size(), 1u);
  EXPECT_EQ(first.threshold_checks[0]["status"], "fail");
  const json report = tp::accept_report(config, {first}, json::object(), json::object(), nullptr);
  const json& history = report["accept"]["attempts"];
  EXPECT_EQ(history[0]["verdict"], "FAIL");
  EXPECT_EQ(names_of(history[0]["checks"]), (std::vector<std::string>{"final_digest", "min_au"}));
  EXPECT_EQ(report["verdict"], "FAIL");
}

TEST(AcceptReport, TheLastAttemptCountsAndEveryAttemptIsKept) {
  const std::vector<tp::StageAttempt> attempts = {
      attempt("preflight", 1, {{"preflight", {{"folders", json::array()}}}},
              json::array({passing("folder_probe")})),
      attempt("train", 1, {{"train", {{"au", 0.3}, {"steps_run", 10}}}},
              json::array({failing("final_digest")})),
      attempt("train", 2, {{"train", {{"au", 0.9}}}}, json::array({passing("final_digest")}))};
  const json report =
      tp::accept_report(preflight_and_train(), attempts, {{"job", {{"wall_s", 100.0}}}},
                        {{"scenario_hash", "h1"}}, nullptr);
  EXPECT_EQ(report["schema"], "trainproof.report/3");
  // The second attempt's section replaces the first's whole.
  EXPECT_EQ(report["train"], (json{{"au", 0.9}}));
  EXPECT_EQ(report["preflight"], (json{{"folders", json::array()}}));
  EXPECT_EQ(report["job"]["wall_s"], 100.0);

  const json& history = report["accept"]["attempts"];
  ASSERT_EQ(history.size(), 3u);
  EXPECT_EQ(history[0], (json{{"stage", "preflight"},
                              {"attempt", 1},
                              {"stopped", false},
                              {"verdict", "PASS"},
                              {"checks", json::array({passing("folder_probe")})}}));
  EXPECT_EQ(history[1]["stage"], "train");
  EXPECT_EQ(history[1]["attempt"], 1);
  EXPECT_EQ(history[1]["verdict"], "FAIL");
  EXPECT_EQ(history[2]["attempt"], 2);
  EXPECT_EQ(history[2]["verdict"], "PASS");
  EXPECT_EQ(report["accept"]["stages"], (json{"preflight", "train"}));
  EXPECT_EQ(report["accept"]["retries"], 1);
  EXPECT_EQ(report["accept"]["baseline"], nullptr);

  const json& checks = report["gate"]["checks"];
  EXPECT_EQ(names_of(checks),
            (std::vector<std::string>{"folder_probe", "stage_sweep", "stage_pairwise",
                                      "final_digest", "stage_restore", "min_au"}));
  EXPECT_EQ(checks[0]["stage"], "preflight");
  EXPECT_EQ(checks[3]["stage"], "train");
  EXPECT_EQ(checks[3]["status"], "pass") << "the failed first attempt's check is history";
  EXPECT_EQ(checks[5]["status"], "warn");
  EXPECT_THAT(checks[5]["reason"].get<std::string>(), HasSubstr("only on a retry"));
  EXPECT_EQ(report["verdict"], "WARN");
}

TEST(AcceptReport, AStageNotSelectedOrNotReachedIsNotApplicable) {
  tp::AcceptConfig c;
  c.stages = {"preflight", "sweep", "train"};
  const json report = tp::accept_report(
      c, {attempt("preflight", 1, json::object(), json::array({passing("folder_probe")}))},
      json::object(), json::object(), nullptr);
  const json& checks = report["gate"]["checks"];
  ASSERT_EQ(checks.size(), 5u);
  EXPECT_EQ(checks[1], (json{{"name", "stage_sweep"},
                             {"value", nullptr},
                             {"threshold", nullptr},
                             {"status", "n/a"},
                             {"reason", "not run: an earlier stage stopped"},
                             {"stage", "sweep"}}));
  EXPECT_EQ(checks[2]["name"], "stage_pairwise");
  EXPECT_EQ(checks[2]["status"], "n/a");
  EXPECT_EQ(checks[2]["reason"], "skipped (accept.stages)");
  EXPECT_EQ(checks[3]["name"], "stage_train");
  EXPECT_EQ(checks[3]["reason"], "not run: an earlier stage stopped");
  EXPECT_EQ(checks[4]["name"], "stage_restore");
  EXPECT_EQ(checks[4]["reason"], "skipped (accept.stages)");
  EXPECT_EQ(report["verdict"], "PASS") << "the one check judged passed";
}

TEST(AcceptReport, VerdictIsFailWarnPassOrNone) {
  tp::AcceptConfig c;
  c.stages = {"train"};
  auto verdict = [&](json checks) {
    return tp::accept_report(c, {attempt("train", 1, json::object(), std::move(checks))},
                             json::object(), json::object(), nullptr)["verdict"];
  };
  EXPECT_EQ(verdict(json::array({passing("a"), failing("b")})), "FAIL");
  EXPECT_EQ(verdict(json::array({passing("a"), tp::gate_check("b", 1, 0, "warn", "close")})),
            "WARN");
  EXPECT_EQ(verdict(json::array({passing("a")})), "PASS");
  EXPECT_EQ(verdict(json::array({tp::gate_check("a", nullptr, 0, "n/a", "not measured")})), "NONE");
  // Nothing ran at all: every check is n/a.
  EXPECT_EQ(tp::accept_report(c, {}, json::object(), json::object(), nullptr)["verdict"], "NONE");
  // A threshold that fails fails the run, however the stage's own checks went.
  c.thresholds = {kMinAu};
  const json low = tp::accept_report(
      c, {attempt("train", 1, {{"train", {{"au", 0.2}}}}, json::array({passing("a")}))},
      json::object(), json::object(), nullptr);
  EXPECT_EQ(low["verdict"], "FAIL");
}

TEST(AcceptReport, RecordsTheGateThresholdsAndMargin) {
  tp::AcceptConfig c = preflight_and_train();
  c.warn_margin = 0.125;
  const json report = tp::accept_report(c, {}, json::object(), json::object(), nullptr);
  EXPECT_EQ(report["gate"]["thresholds"], tp::thresholds_json(c));
  EXPECT_EQ(report["gate"]["thresholds"][0]["check"], "min_au");
  EXPECT_EQ(report["gate"]["warn_margin"], 0.125);
}

TEST(AcceptReport, AnotherScenarioHashIsAContextWarning) {
  tp::AcceptConfig c = preflight_and_train();
  const json plain = tp::accept_report(c, {}, json::object(), {{"scenario_hash", "h1"}}, nullptr);
  EXPECT_EQ(plain["context"]["warnings"], json::array()) << "no expected hash: nothing to compare";
  c.expected_hash = "h1";
  const json same = tp::accept_report(c, {}, json::object(), {{"scenario_hash", "h1"}}, nullptr);
  EXPECT_EQ(same["context"]["warnings"], json::array());
  c.expected_hash = "h0";
  const json other =
      tp::accept_report(c, {}, json::object(),
                        {{"scenario_hash", "h1"}, {"warnings", {"an earlier warning"}}}, nullptr);
  EXPECT_EQ(other["context"]["warnings"],
            (json{"an earlier warning",
                  "the gate's thresholds were measured with scenario h0 (gate.scenario_hash), and "
                  "this run is h1: AU, step CV and goodput thresholds may not apply"}));
  EXPECT_EQ(other["context"]["scenario_hash"], "h1");
}

TEST(AcceptReport, BaselineChecksFollowTheThresholds) {
  tp::AcceptConfig c;
  c.stages = {"train"};
  c.baseline = "golden.json";
  c.tolerance = 0.9;
  const json golden = baseline_report(100, 0.1, "h1");
  const json report =
      tp::accept_report(c,
                        {attempt("train", 1, {{"train", baseline_report(50, 0.1, "h1")["train"]}},
                                 json::array({passing("final_digest")}))},
                        json::object(), {{"scenario_hash", "h1"}}, golden);
  EXPECT_EQ(report["accept"]["baseline"], "golden.json");
  const json& checks = report["gate"]["checks"];
  EXPECT_EQ(named(checks, "baseline_samples_s")["status"], "fail");
  EXPECT_EQ(named(checks, "baseline_samples_s")["source"], "--baseline golden.json");
  EXPECT_EQ(report["verdict"], "FAIL");
}

TEST(AcceptReport, SweepAndPairwiseShareOneSweepSection) {
  json report = json::object();
  tp::add_sections(report, {{"sweep", {{"mode", "collectives"}, {"results", {1, 2}}}}});
  const json flagged_n0 = {{"host", "n0"}, {"flagged", true}, {"reasons", {"pairwise: slow"}}};
  tp::add_sections(report,
                   {{"sweep", {{"mode", "pairwise"}, {"pairwise", {{"rails", json::array()}}}}},
                    {"nodes", {flagged_n0}}});
  EXPECT_EQ(
      report,
      (json{{"sweep",
             {{"mode", "pairwise"}, {"results", {1, 2}}, {"pairwise", {{"rails", json::array()}}}}},
            {"nodes", {flagged_n0}}}));
  // One list per node: a later stage adds its findings and replaces none.
  tp::add_sections(
      report,
      {{"nodes",
        {{{"host", "n0"}, {"flagged", false}, {"reasons", {"rank 0: straggler"}}, {"score", 0.9}},
         {{"host", "n1"}, {"flagged", false}, {"reasons", json::array()}}}}});
  EXPECT_EQ(report["nodes"],
            (json{{{"host", "n0"},
                   {"flagged", true},
                   {"reasons", {"pairwise: slow", "rank 0: straggler"}},
                   {"score", 0.9}},
                  {{"host", "n1"}, {"flagged", false}, {"reasons", json::array()}}}));
  // Any other section is replaced whole.
  tp::add_sections(report, {{"train", {{"au", 0.5}}}});
  tp::add_sections(report, {{"train", {{"au", 0.6}}}});
  EXPECT_EQ(report["train"], (json{{"au", 0.6}}));
  // A sweep that is not yet an object is replaced too.
  json empty = {{"sweep", nullptr}};
  tp::add_sections(empty, {{"sweep", {{"mode", "pairwise"}}}});
  EXPECT_EQ(empty["sweep"], (json{{"mode", "pairwise"}}));
}

TEST(AcceptReport, BothSweepStagesAreJudgedFromTheMergedSection) {
  tp::AcceptConfig c;
  c.stages = {"sweep", "pairwise"};
  c.thresholds = {kMinBusbw, kMinPair};
  const json pairwise = {
      {"rails", {{{"hosts", {"a", "b"}}, {"one_way_gbps", {{nullptr, 40.0}, {11.0, nullptr}}}}}}};
  const json report = tp::accept_report(
      c,
      {attempt("sweep", 1, {{"sweep", sweep_report()["sweep"]}}, json::array()),
       attempt("pairwise", 1, {{"sweep", {{"pairwise", pairwise}}}}, json::array())},
      json::object(), json::object(), nullptr);
  EXPECT_EQ(report["sweep"]["results"], sweep_report()["sweep"]["results"]);
  const json& checks = report["gate"]["checks"];
  EXPECT_EQ(named(checks, "min_busbw_gbps.allreduce")["value"], 60.0);
  EXPECT_EQ(named(checks, "min_pair_gbps")["value"], 11.0);
  EXPECT_EQ(named(checks, "min_pair_gbps")["status"], "pass") << "11 clears 10 by over 5%";
  EXPECT_THAT(named(checks, "min_pair_gbps")["reason"].get<std::string>(),
              StartsWith("nodes b to a: "));
}

// The restore's digest check

TEST(AcceptRestore, DigestCheckCountsTheRanksThatDifferAndQuotesTheFirst) {
  const json passed = tp::restore_digest_check({"", "", ""}, 40);
  EXPECT_EQ(passed, (json{{"name", "restore_digest"},
                          {"value", 0},
                          {"threshold", 0},
                          {"status", "pass"},
                          {"reason", "every rank restored step 40 bit for bit from a cold read"}}));
  const json failed = tp::restore_digest_check(
      {"", "rank 1 (n0): restored state ab differs from the trained state cd", "",
       "rank 3 (n1): no checkpoint in the folder verified"},
      40);
  EXPECT_EQ(failed["status"], "fail");
  EXPECT_EQ(failed["value"], 2);
  EXPECT_EQ(failed["reason"],
            "2 rank(s) differ; first: rank 1 (n0): restored state ab differs from the trained "
            "state cd");
}

// The job's queue time and the cost's inputs

TEST(JobReport, QueueSecondsFromScontrol) {
  const std::string shown =
      "JobId=7 JobName=accept UserId=u(1) JobState=RUNNING Reason=None "
      "SubmitTime=2026-12-01T10:00:00 EligibleTime=2026-12-01T10:00:00 "
      "AccrueTime=2026-12-01T10:00:01 StartTime=2026-12-01T10:02:30 EndTime=2026-12-01T11:02:30";
  EXPECT_EQ(tp::queue_seconds_from(shown), 150.0);
  // Across a year's end.
  EXPECT_EQ(tp::queue_seconds_from("SubmitTime=2026-12-31T23:59:00 StartTime=2027-01-01T00:01:00"),
            120.0);
  EXPECT_EQ(tp::queue_seconds_from("SubmitTime=2026-12-01T10:00:00 StartTime=2026-12-01T10:00:00"),
            0.0);
}

TEST(JobReport, NoQueueSecondsWithoutBothTimes) {
  EXPECT_EQ(tp::queue_seconds_from(""), std::nullopt);
  EXPECT_EQ(tp::queue_seconds_from("SubmitTime=2026-12-01T10:00:00 EndTime=2026-12-01T11:00:00"),
            std::nullopt);
  EXPECT_EQ(tp::queue_seconds_from("StartTime=2026-12-01T10:00:00"), std::nullopt);
  EXPECT_EQ(tp::queue_seconds_from("SubmitTime=2026-12-01T10:00:00 StartTime=Unknown"),
            std::nullopt);
  EXPECT_EQ(tp::queue_seconds_from("SubmitTime=2026-12-01T10:05:00 StartTime=2026-12-01T10:00:00"),
            std::nullopt)
      << "a start before the submit is no queue time";
}

// An accept run's report: 1000 s in all, of which preflight 20, sweep 60, pairwise 40 and the
// cold restore 30 are not training; 4 ranks on 2 hosts, 2 of them with a GPU.
json cost_fixture() {
  return {{"job",
           {{"wall_s", 1000.0},
            {"categories",
             {{{"name", "launch"}, {"seconds", 5.0}},
              {{"name", "preflight"}, {"seconds", 20.0}},
              {{"name", "sweep"}, {"seconds", 60.0}},
              {{"name", "pairwise"}, {"seconds", 40.0}},
              {{"name", "restore"}, {"seconds", 15.0}},
              {{"name", "productive"}, {"seconds", 700.0}},
              {{"name", "cold_restore"}, {"seconds", 30.0}}}},
            {"lost",
             {{{"name", "warmup_steps"}, {"seconds", 25.0}},
              {{"name", "data_stall"}, {"seconds", 10.0}}}}}},
          {"ranks",
           {{{"rank", 0}, {"host", "n0"}, {"gpu", {{"index", 0}}}},
            {{"rank", 1}, {"host", "n0"}, {"gpu", {{"index", 1}}}},
            {{"rank", 2}, {"host", "n1"}, {"gpu", nullptr}},
            {{"rank", 3}, {"host", "n1"}}}},
          {"train",
           {{"steps_run", 40},
            {"model", {{"global_batch", 8}, {"seq", 128}}},
            {"phases", {{"step", {{"p50", 0.5}}}}}}},
          {"checkpoint",
           {{"bytes", 1e9},
            {"keep", 2},
            {"every", 10},
            {"saves",
             {{{"time_to_durable_s", 3.0}},
              {{"time_to_durable_s", 7.0}},
              {{"time_to_durable_s", 4.0}}}},
            {"stall_s", {{"p50", 0.2}}},
            {"total_s", {{"p50", 5.0}}},
            {"restore", {{"bytes", 5e8}}}}},
          {"data", {{"bytes_read", 5e9}}},
          {"restore", {{"bytes", 1e9}}},
          {"drill",
           {{"rto_s", 12.0},
            {"rpo_steps", 3.0},
            {"failures",
             {{{"rto_s", 10.0}, {"rpo_steps", 2.0}}, {{"rto_s", 12.0}, {"rpo_steps", 3.0}}}}}}};
}

TEST(JobReport, CostInputsFromAReportByHand) {
  const tp::CostInputs in = tp::cost_inputs_from(cost_fixture());
  EXPECT_EQ(in.wall_s, 1000.0);
  EXPECT_EQ(in.training_wall_s, 850.0) << "1000 - 20 - 60 - 40 - 30; train's own restore stays";
  EXPECT_EQ(in.nodes, 2);
  EXPECT_EQ(in.gpus, 2) << "a null or absent gpu is no GPU";
  EXPECT_EQ(in.steps_completed, 40);
  EXPECT_EQ(in.tokens, 40.0 * 8 * 128);
  EXPECT_EQ(in.step_s, 0.5);
  EXPECT_EQ(in.checkpoint_bytes_kept, 2e9) << "1e9 x min(keep 2, 3 saves)";
  EXPECT_EQ(in.checkpoint_every, 10);
  EXPECT_EQ(in.ckpt_stall_s, 0.2);
  EXPECT_EQ(in.time_to_durable_s, 7.0) << "the slowest save, above the p50 of 5";
  EXPECT_EQ(in.bytes_read, 5e8 + 5e9 + 1e9) << "train's restore, the data and the cold restore";
  EXPECT_EQ(in.losses, (std::vector<std::pair<std::string, double>>{{"warmup_steps", 25.0},
                                                                    {"data_stall", 10.0}}));
  ASSERT_TRUE(in.rto_s.has_value());
  EXPECT_EQ(*in.rto_s, 12.0);
  ASSERT_TRUE(in.rpo_steps.has_value());
  EXPECT_EQ(*in.rpo_steps, 3.0);
  ASSERT_EQ(in.failures.size(), 2u);
  EXPECT_EQ(in.failures[0].redone_s, 1.0) << "2 steps of 0.5 s";
  EXPECT_EQ(in.failures[0].recovery_s, 10.0);
  EXPECT_EQ(in.failures[1].redone_s, 1.5);
  EXPECT_EQ(in.failures[1].recovery_s, 12.0);
}

TEST(JobReport, CostInputsKeepFewerCheckpointsThanKeepWhenFewerWereSaved) {
  json report = cost_fixture();
  report["checkpoint"]["keep"] = 5;
  EXPECT_EQ(tp::cost_inputs_from(report).checkpoint_bytes_kept, 3e9);
}

TEST(JobReport, CostInputsOfAJobSectionAlone) {
  const tp::CostInputs in = tp::cost_inputs_from({{"job", {{"wall_s", 10.0}}}});
  EXPECT_EQ(in.wall_s, 10.0);
  EXPECT_EQ(in.training_wall_s, 10.0);
  EXPECT_EQ(in.nodes, 1) << "one node even without ranks";
  EXPECT_EQ(in.gpus, 0);
  EXPECT_EQ(in.steps_completed, 0);
  EXPECT_EQ(in.tokens, 0.0);
  EXPECT_EQ(in.checkpoint_bytes_kept, 0.0);
  EXPECT_EQ(in.bytes_read, 0.0);
  EXPECT_TRUE(in.losses.empty());
  EXPECT_FALSE(in.rto_s.has_value());
  EXPECT_TRUE(in.failures.empty());
  EXPECT_EQ(tp::cost_inputs_from({{"job", {{"wall_s", 10.0}}}, {"checkpoint", nullptr}})
                .checkpoint_bytes_kept,
            0.0)
      << "a run without checkpoints has a null section";
}

}  // namespace
