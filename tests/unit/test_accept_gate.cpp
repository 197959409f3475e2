#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "app/accept/accept_config.h"
#include "app/accept/accept_preflight.h"
#include "app/accept/accept_report.h"
#include "app/accept/accept_restore.h"
#include "app/cli/cli.h"
#include "app/cli/cli_options.h"
#include "app/job/job_report.h"
#include "app/judge/baseline.h"
#include "app/judge/gate_judge.h"
#include "app/report/gate.h"
#include "common/errors.h"
#include "tests/unit/accept_fixtures.h"

namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;
namespace po = boost::program_options;
namespace fs = std::filesystem;

using Sources = std::map<std::string, std::string>;

using namespace tp::test;  // NOLINT(google-build-using-namespace): the fixtures of these tests

TEST(AcceptGate, BusbwIsOneCheckPerGatedOperationAtTheChosenSize) {
  tp::AcceptConfig c = gated({kMinBusbw});
  c.busbw_bytes = 64 * kMiB;
  const json checks = tp::judge_thresholds(c, sweep_report(), {{"sweep", 1}});
  EXPECT_EQ(names_of(checks),
            (std::vector<std::string>{"min_busbw_gbps.allreduce", "min_busbw_gbps.allgather",
                                      "min_busbw_gbps.reducescatter"}));
  // gate.busbw_bytes is the smallest size that must reach the floor: the best row at or above
  // it, 256 MiB's 60 GB/s over 64 MiB's 50.
  const json& allreduce = named(checks, "min_busbw_gbps.allreduce");
  EXPECT_EQ(allreduce["value"], 60.0);
  EXPECT_EQ(allreduce["threshold"], 30.0);
  EXPECT_EQ(allreduce["status"], "pass");
  EXPECT_EQ(allreduce["direction"], "at_least");
  EXPECT_EQ(allreduce["source"], "--gate.min_busbw_gbps on the command line");
  EXPECT_EQ(allreduce["reason"],
            "sweep allreduce: in-place busbw at 268435456 bytes, at the median iteration, the best "
            "of 2 row(s) at or above gate.busbw_bytes 67108864; 60 GB/s is at least 30 GB/s "
            "(limit from --gate.min_busbw_gbps on the command line)");
  // Nothing reached 64 MiB: the largest row it ran.
  const json& allgather = named(checks, "min_busbw_gbps.allgather");
  EXPECT_EQ(allgather["value"], 20.0);
  EXPECT_EQ(allgather["status"], "fail");
  EXPECT_THAT(allgather["reason"].get<std::string>(),
              HasSubstr("in-place busbw at 16777216 bytes, at the median iteration, the largest "
                        "row: none reached gate.busbw_bytes 67108864; 20 GB/s is below 30 GB/s"));
  // The better of 128 MiB (42) and 256 MiB (45), whatever their order.
  const json& reducescatter = named(checks, "min_busbw_gbps.reducescatter");
  EXPECT_EQ(reducescatter["value"], 45.0);
  EXPECT_EQ(reducescatter["status"], "pass");
  EXPECT_THAT(reducescatter["reason"].get<std::string>(), HasSubstr("at 268435456 bytes"));
}

// One iteration that the OS preempted doubles a 20-iteration mean on a shared host: the gate reads
// the busbw at the median iteration, so the fabric is judged, not the scheduler.
TEST(AcceptGate, BusbwIsJudgedAtTheMedianIteration) {
  tp::AcceptConfig c = gated({kMinBusbw});
  c.busbw_bytes = 64 * kMiB;
  json report = sweep_report();
  for (json& row : report["sweep"]["results"])
    if (row["op"] == "allreduce" && row["bytes"] == 256 * kMiB) {
      row["busbw_gbps"] = 30.0;  // nccl-tests' figure, from the mean time
      row["time_us"] = {{"mean", 400.0}, {"p50", 200.0}, {"p99", 4000.0}};
    }
  // At its median the 256 MiB row is 60 GB/s, the best; by its mean, 30 and the 64 MiB row won.
  const json checks = tp::judge_thresholds(c, report, {{"sweep", 1}});
  EXPECT_EQ(named(checks, "min_busbw_gbps.allreduce")["value"], 60.0);
  EXPECT_EQ(named(checks, "min_busbw_gbps.allreduce")["status"], "pass");
}

TEST(AcceptGate, BusbwSizeFollowsGateBusbwBytes) {
  tp::AcceptConfig c = gated({kMinBusbw});
  c.busbw_bytes = 128 * kMiB;  // allreduce: only 256 MiB is at or above; allgather: none
  const json large_rows = tp::judge_thresholds(c, sweep_report(), {{"sweep", 1}});
  EXPECT_EQ(named(large_rows, "min_busbw_gbps.allreduce")["value"], 60.0);
  EXPECT_EQ(named(large_rows, "min_busbw_gbps.allgather")["value"], 20.0);
  // A small gate.busbw_bytes lets the best row anywhere above it count; a row below it never
  // does: 1 MiB's 10 GB/s stays out at 2 MiB, and would lose at 1 MiB anyway.
  for (int64_t bytes : {2 * kMiB, 1 * kMiB}) {
    c.busbw_bytes = bytes;
    const json small = tp::judge_thresholds(c, sweep_report(), {{"sweep", 1}});
    EXPECT_EQ(named(small, "min_busbw_gbps.allreduce")["value"], 60.0);
    EXPECT_EQ(named(small, "min_busbw_gbps.allgather")["value"], 20.0);
    EXPECT_EQ(named(small, "min_busbw_gbps.reducescatter")["value"], 45.0);
  }
  c.busbw_bytes = 1024 * kMiB;  // above every row: the largest
  const json large = tp::judge_thresholds(c, sweep_report(), {{"sweep", 1}});
  EXPECT_EQ(named(large, "min_busbw_gbps.allreduce")["value"], 60.0);
  EXPECT_EQ(named(large, "min_busbw_gbps.reducescatter")["value"], 45.0);
}

TEST(AcceptGate, BusbwWithoutAnInPlaceRowOrAnyRowIsNotApplicable) {
  const tp::AcceptConfig c = gated({kMinBusbw});
  const json only_out_of_place = {
      {"sweep", {{"results", {sweep_row("allgather", 64 * kMiB, 90, false)}}}}};
  const json checks = tp::judge_thresholds(c, only_out_of_place, {{"sweep", 1}});
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0]["name"], "min_busbw_gbps.allgather");
  EXPECT_EQ(checks[0]["status"], "n/a");
  EXPECT_EQ(checks[0]["reason"], "not measured: the sweep ran no in-place row of allgather");

  const json ungated = {{"sweep", {{"results", {sweep_row("alltoall", 64 * kMiB, 90)}}}}};
  const json none = tp::judge_thresholds(c, ungated, {{"sweep", 1}});
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(none[0]["name"], "min_busbw_gbps");
  EXPECT_EQ(none[0]["status"], "n/a");
  EXPECT_EQ(none[0]["reason"], "not measured: the sweep measured no operation");

  const json skipped = tp::judge_thresholds(c, sweep_report(), {{"train", 1}});
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0]["name"], "min_busbw_gbps");
  EXPECT_EQ(skipped[0]["reason"], "not measured: stage sweep did not run");
}

TEST(AcceptGate, SlowestPairNamesItsTwoHosts) {
  // Rail 0's slowest direction is n2 to n1 (9); rail 1's diagonal 0 is a node to itself.
  const json report = {
      {"sweep",
       {{"pairwise",
         {{"rails",
           {{{"hosts", {"n0", "n1", "n2"}},
             {"one_way_gbps",
              {{nullptr, 20.0, 25.0}, {18.0, nullptr, 30.0}, {22.0, 9.0, nullptr}}}},
            {{"hosts", {"n0", "n1", "n2"}},
             {"one_way_gbps", {{0.0, 12.0, 13.0}, {14.0, 0.0, 15.0}, {16.0, 17.0, 0.0}}}}}}}}}}};
  const json checks = tp::judge_thresholds(gated({kMinPair}), report, {{"pairwise", 1}});
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0]["name"], "min_pair_gbps");
  EXPECT_EQ(checks[0]["value"], 9.0);
  EXPECT_EQ(checks[0]["status"], "fail");
  EXPECT_EQ(checks[0]["reason"],
            "nodes n2 to n1: slowest pair of nodes, one direction at a time (first pass); 9 GB/s "
            "is below 10 GB/s (limit from --gate.min_pair_gbps on the command line)");
}

TEST(AcceptGate, APairMeasuredAgainCountsByItsConfirmedFigureWithItsNoise) {
  // n2 to n1 was 9 GB/s in the first pass; measured again at 9.2 with a noise of 10%, it stands
  // at 10.12 for the gate: not below 10 by more than its spread. At 8 it fails.
  const auto report = [](double again) {
    return json{{"sweep",
                 {{"pairwise",
                   {{"rails",
                     {{{"hosts", {"n1", "n2"}},
                       {"one_way_gbps", {{nullptr, 20.0}, {9.0, nullptr}}},
                       {"confirmations",
                        {{{"kind", "pair"},
                          {"both_ways", false},
                          {"from", "n2"},
                          {"to", "n1"},
                          {"gbps", again},
                          {"noise", 0.1},
                          {"transfers", 10}}}}}}}}}}}};
  };
  const json held = tp::judge_thresholds(gated({kMinPair}, 0.0), report(9.2), {{"pairwise", 1}});
  EXPECT_EQ(held[0]["status"], "pass") << held.dump();
  EXPECT_NEAR(held[0]["value"].get<double>(), 10.12, 1e-9);
  EXPECT_THAT(held[0]["reason"].get<std::string>(),
              HasSubstr("measured again over 10 transfers, its noise (10%) in its favour"));
  const json fell = tp::judge_thresholds(gated({kMinPair}, 0.0), report(8.0), {{"pairwise", 1}});
  EXPECT_EQ(fell[0]["status"], "fail") << fell.dump();
}

TEST(AcceptGate, AThresholdPerNodeOrPerGpuIsScaledByTheJobsSize) {
  tp::GateThreshold per_node =
      gate("min_ckpt_write_gbps_per_node", tp::Direction::at_least, 2, "train", "w");
  per_node.per = "node";
  tp::GateThreshold per_gpu =
      gate("min_restore_gbps_per_gpu", tp::Direction::at_least, 1, "restore", "r");
  per_gpu.per = "gpu";
  const auto report = [](int nodes, int gpus) {
    json r = {{"checkpoint", {{"write_gbps", 15.0}}}, {"restore", {{"gbps", 7.0}}}};
    r["nodes"] = json::array();
    for (int n = 0; n < nodes; ++n) r["nodes"].push_back({{"host", std::to_string(n)}});
    r["ranks"] = json::array();
    for (int g = 0; g < 8; ++g)
      r["ranks"].push_back({{"gpu", g < gpus ? json{{"uuid", "GPU-x"}} : json(nullptr)}});
    return r;
  };
  // 15 GB/s over 8 nodes is below 2 per node (16); over 4 nodes it clears 8.
  json checks = tp::judge_thresholds(gated({per_node, per_gpu}), report(8, 8),
                                     {{"train", 1}, {"restore", 1}});
  EXPECT_EQ(checks[0]["status"], "fail") << checks[0].dump();
  EXPECT_EQ(checks[0]["threshold"], 16.0);
  EXPECT_THAT(checks[0]["reason"].get<std::string>(), HasSubstr("(2 per node x 8 nodes)"));
  EXPECT_EQ(checks[1]["status"], "fail") << "7 GB/s against 1 per GPU x 8 GPUs";
  checks = tp::judge_thresholds(gated({per_node, per_gpu}), report(4, 6),
                                {{"train", 1}, {"restore", 1}});
  EXPECT_EQ(checks[0]["status"], "pass") << checks[0].dump();
  EXPECT_EQ(checks[0]["threshold"], 8.0);
  EXPECT_EQ(checks[1]["status"], "pass") << checks[1].dump();
  checks = tp::judge_thresholds(gated({per_node, per_gpu}), report(4, 0),
                                {{"train", 1}, {"restore", 1}});
  EXPECT_EQ(checks[1]["status"], "n/a");
  EXPECT_THAT(checks[1]["reason"].get<std::string>(), HasSubstr("no rank drives a GPU"));
}

TEST(AcceptGate, StragglerScoreNamesTheWeakestRank) {
  const tp::GateThreshold straggler =
      gate("min_straggler_score", tp::Direction::at_least, 0.8, "train", "straggler score");
  const json report = {{"ranks",
                        {{{"rank", 0}, {"host", "n0"}, {"straggler_score", 1.0}},
                         {{"rank", 1}, {"host", "n0"}, {"straggler_score", 0.95}},
                         {{"rank", 2}, {"host", "n1"}, {"straggler_score", 0.7}},
                         {{"rank", 3}, {"host", "n1"}, {"straggler_score", nullptr}}}}};
  const json checks = tp::judge_thresholds(gated({straggler}), report, {{"train", 1}});
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0]["value"], 0.7);
  EXPECT_EQ(checks[0]["status"], "fail");
  EXPECT_THAT(checks[0]["reason"].get<std::string>(),
              StartsWith("rank 2 (n1): lowest straggler score (1 is the median rank); 0.7 is "
                         "below 0.8"));
}

TEST(AcceptGate, ExposedFractionIsCommExposedOverStep) {
  const tp::GateThreshold exposed = gate("max_comm_exposed_fraction", tp::Direction::at_most, 0.3,
                                         "train", "exposed communication over the step time");
  const json report = {
      {"train", {{"phases", {{"comm_exposed", {{"p50", 0.125}}}, {"step", {{"p50", 0.5}}}}}}}};
  const json checks = tp::judge_thresholds(gated({exposed}), report, {{"train", 1}});
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0]["value"], 0.25);
  EXPECT_EQ(checks[0]["status"], "pass");
  EXPECT_EQ(checks[0]["direction"], "at_most");
  EXPECT_THAT(checks[0]["reason"].get<std::string>(),
              HasSubstr("comm_exposed p50 over step p50; 0.25 is at most 0.3"));
  // A step time of 0 measures no fraction.
  json still = report;
  still["train"]["phases"]["step"]["p50"] = 0.0;
  const json none = tp::judge_thresholds(gated({exposed}), still, {{"train", 1}});
  EXPECT_EQ(none[0]["status"], "n/a");
}

TEST(AcceptGate, AStageThatDidNotRunOrMeasuredNothingIsNotApplicable) {
  const json report = {{"train", {{"step_cv", 0.1}}}};
  const json skipped = tp::judge_thresholds(gated({kMinAu}), report, {});
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0]["status"], "n/a");
  EXPECT_EQ(skipped[0]["value"], nullptr);
  EXPECT_EQ(skipped[0]["threshold"], 0.5);
  EXPECT_EQ(skipped[0]["reason"], "not measured: stage train did not run");
  EXPECT_EQ(skipped[0]["direction"], "at_least");
  EXPECT_EQ(skipped[0]["source"], "--gate.min_au on the command line");

  const json unmeasured = tp::judge_thresholds(gated({kMinAu}), report, {{"train", 1}});
  EXPECT_EQ(unmeasured[0]["status"], "n/a");
  EXPECT_EQ(unmeasured[0]["reason"],
            "not measured: stage train ran but did not measure the accelerator utilisation");

  // A figure present in the report is still not judged when its stage is not among those run.
  const json cv = tp::judge_thresholds(gated({kMaxStepCv}), report, {{"sweep", 1}});
  EXPECT_EQ(cv[0]["status"], "n/a");
  EXPECT_EQ(cv[0]["value"], nullptr);
}

TEST(AcceptGate, APassOnlyOnARetryIsAWarning) {
  const json good = {{"train", {{"au", 0.9}}}};
  const json once = tp::judge_thresholds(gated({kMinAu}), good, {{"train", 1}});
  EXPECT_EQ(once[0]["status"], "pass");
  const json twice = tp::judge_thresholds(gated({kMinAu}), good, {{"train", 2}});
  EXPECT_EQ(twice[0]["status"], "warn");
  EXPECT_EQ(twice[0]["reason"],
            "train: compute p50 / step p50; 0.9 is at least 0.5, only on a retry (limit from "
            "--gate.min_au on the command line)");
  // A failure stays a failure, retried or not.
  const json bad = {{"train", {{"au", 0.4}}}};
  EXPECT_EQ(tp::judge_thresholds(gated({kMinAu}), bad, {{"train", 3}})[0]["status"], "fail");
  // Each operation of the sweep, too.
  const json busbw = tp::judge_thresholds(gated({kMinBusbw}), sweep_report(), {{"sweep", 2}});
  EXPECT_EQ(named(busbw, "min_busbw_gbps.allreduce")["status"], "warn");
  EXPECT_THAT(named(busbw, "min_busbw_gbps.allreduce")["reason"].get<std::string>(),
              HasSubstr("only on a retry"));
}

TEST(AcceptGate, DrillThresholdsWaitForReportMerge) {
  const tp::GateThreshold rto =
      gate("max_rto_s", tp::Direction::at_most, 60, "drill", "recovery time of a failure");
  const tp::GateThreshold drill =
      gate("drill", tp::Direction::at_least, 1, "drill", "recovery drill's verdict");
  // Even a report holding a drill's figures: accept never runs the drill.
  const json report = {{"drill", {{"rto_s", 5.0}}}};
  const json checks = tp::judge_thresholds(gated({rto, drill}), report,
                                           {{"preflight", 1}, {"train", 1}, {"restore", 1}});
  ASSERT_EQ(checks.size(), 2u);
  for (const json& c : checks) {
    EXPECT_EQ(c["status"], "n/a") << c.dump();
    EXPECT_EQ(c["value"], nullptr);
    EXPECT_EQ(c["reason"], "not measured: the drill is judged when report merge joins its report");
  }
  EXPECT_EQ(checks[0]["direction"], "at_most");
  EXPECT_EQ(checks[1]["name"], "drill");
}

// gate.warn_margin 0.25 of a 0.5 limit is 0.125: every edge is exact in binary.
TEST(AcceptGate, WarnBandEdgesForAtLeast) {
  auto status = [](double au) {
    const json report = {{"train", {{"au", au}}}};
    return tp::judge_thresholds(gated({kMinAu}, 0.25), report, {{"train", 1}})[0]["status"];
  };
  EXPECT_EQ(status(0.625), "pass") << "the band's edge passes";
  EXPECT_EQ(status(0.62), "warn");
  EXPECT_EQ(status(0.5), "warn") << "on the limit";
  EXPECT_EQ(status(0.49), "fail");
  const json report = {{"train", {{"au", 0.55}}}};
  EXPECT_EQ(tp::judge_thresholds(gated({kMinAu}, 0.25), report, {{"train", 1}})[0]["reason"],
            "train: compute p50 / step p50; 0.55 is at least 0.5, within 25% of it (limit from "
            "--gate.min_au on the command line)");
}

TEST(AcceptGate, WarnBandEdgesForAtMost) {
  auto status = [](double cv) {
    const json report = {{"train", {{"step_cv", cv}}}};
    return tp::judge_thresholds(gated({kMaxStepCv}, 0.25), report, {{"train", 1}})[0]["status"];
  };
  EXPECT_EQ(status(0.375), "pass") << "the band's edge passes";
  EXPECT_EQ(status(0.38), "warn");
  EXPECT_EQ(status(0.5), "warn") << "on the limit";
  EXPECT_EQ(status(0.51), "fail");
  const json report = {{"train", {{"step_cv", 0.51}}}};
  const json check = tp::judge_thresholds(gated({kMaxStepCv}, 0.25), report, {{"train", 1}})[0];
  EXPECT_EQ(check["direction"], "at_most");
  EXPECT_EQ(check["source"], "--gate.max_step_cv on the command line");
  EXPECT_THAT(check["reason"].get<std::string>(), HasSubstr("0.51 is above 0.5"));
}

TEST(AcceptGate, EachFigureIsReadFromItsSection) {
  const tp::AcceptConfig c = gated({
      gate("min_ckpt_write_gbps", tp::Direction::at_least, 1, "train", "w"),
      gate("max_ckpt_overhead", tp::Direction::at_most, 0.1, "train", "s"),
      gate("min_goodput", tp::Direction::at_least, 0.5, "train", "g"),
      gate("min_restore_gbps", tp::Direction::at_least, 1, "restore", "r"),
      gate("max_restore_s", tp::Direction::at_most, 60, "restore", "t"),
      gate("min_job_goodput", tp::Direction::at_least, 0.2, "train", "j"),
  });
  const json report = {{"checkpoint", {{"write_gbps", 2.5}, {"overhead", 0.02}}},
                       {"job", {{"goodput", 0.3}, {"train_goodput", 0.75}}},
                       {"restore", {{"gbps", 3.5}, {"seconds", 12.0}}}};
  const json checks = tp::judge_thresholds(c, report, {{"train", 1}, {"restore", 1}});
  ASSERT_EQ(checks.size(), 6u);
  EXPECT_EQ(checks[0]["value"], 2.5);
  EXPECT_EQ(checks[1]["value"], 0.02);
  EXPECT_EQ(checks[2]["value"], 0.75) << "the training stage's own goodput";
  EXPECT_EQ(checks[3]["value"], 3.5);
  EXPECT_EQ(checks[4]["value"], 12.0);
  EXPECT_EQ(checks[5]["value"], 0.3) << "the whole job's";
  for (const json& check : checks) EXPECT_EQ(check["status"], "pass") << check.dump();
}

TEST(AcceptGate, StageFailedOnItsOwnChecksOrItsOwnThresholds) {
  const tp::AcceptConfig c = gated({kMinAu, kMinPair});
  const json passed = json::array({tp::gate_check("final_digest", 0, 0, "pass", "same")});
  const json failed = json::array({tp::gate_check("final_digest", 2, 0, "fail", "diverged")});
  // The pairwise stage's failing figure is no reason to run train again.
  const json pair_fails = {
      {"train", {{"au", 0.9}}},
      {"sweep",
       {{"pairwise",
         {{"rails",
           {{{"hosts", {"a", "b"}}, {"one_way_gbps", {{nullptr, 1.0}, {1.0, nullptr}}}}}}}}}}};
  EXPECT_FALSE(tp::stage_failed(c, "train", pair_fails, passed));
  EXPECT_TRUE(tp::stage_failed(c, "pairwise", pair_fails, json::array()));
  EXPECT_TRUE(tp::stage_failed(c, "train", pair_fails, failed));
  EXPECT_TRUE(tp::stage_failed(c, "train", {{"train", {{"au", 0.4}}}}, passed));
  EXPECT_FALSE(tp::stage_failed(c, "train", {{"train", {{"au", 0.51}}}}, passed)) << "a warning";
  EXPECT_FALSE(tp::stage_failed(c, "train", json::object(), passed)) << "n/a is not a failure";
  const json warned = json::array({tp::gate_check("topology", 1, 0, "warn", "flagged")});
  EXPECT_FALSE(tp::stage_failed(c, "preflight", json::object(), warned));
}

TEST(AcceptGate, BaselineChecksOnePerMetricAgainstGoldenTimesTolerance) {
  const json golden = baseline_report(100, 0.1, "h1");
  const json fresh = baseline_report(80, 0.1, "h1");
  const json checks = tp::baseline_checks(golden, fresh, 0.9, "golden.json");
  EXPECT_EQ(names_of(checks),
            (std::vector<std::string>{
                "baseline_samples_s", "baseline_tokens_s", "baseline_AU", "baseline_step_p50",
                "baseline_compute_p50", "baseline_comm_p50", "baseline_achieved_FLOP_s",
                "baseline_checkpoint_write", "baseline_checkpoint_restore",
                "baseline_checkpoint_overhead", "baseline_data_read", "baseline_sweep_avg_busbw",
                "baseline_sweep_avg_busbw_1_MiB"}));
  const json& samples = named(checks, "baseline_samples_s");
  EXPECT_EQ(samples["value"], 80.0);
  EXPECT_DOUBLE_EQ(samples["threshold"].get<double>(), 90.0);
  EXPECT_EQ(samples["status"], "fail");
  EXPECT_EQ(samples["direction"], "at_least");
  EXPECT_EQ(samples["source"], "--baseline golden.json");
  EXPECT_THAT(samples["reason"].get<std::string>(), StartsWith("fell to 80% of golden"));
  EXPECT_THAT(samples["reason"].get<std::string>(), HasSubstr("(golden golden.json)"));
  const json& au = named(checks, "baseline_AU");
  EXPECT_EQ(au["status"], "pass");
  EXPECT_DOUBLE_EQ(au["threshold"].get<double>(), 0.8 * 0.9);
  // Lower is better: the threshold is the golden step time over the tolerance.
  const json& step = named(checks, "baseline_step_p50");
  EXPECT_EQ(step["status"], "pass");
  EXPECT_EQ(step["direction"], "at_most");
  EXPECT_DOUBLE_EQ(step["threshold"].get<double>(), 0.1 / 0.9);
  // In neither report: no threshold, no value, n/a.
  const json& tokens = named(checks, "baseline_tokens_s");
  EXPECT_EQ(tokens["status"], "n/a");
  EXPECT_EQ(tokens["threshold"], nullptr);
  EXPECT_EQ(tokens["value"], nullptr);
  EXPECT_EQ(tokens["reason"], "not in either report (golden golden.json)");
}

TEST(AcceptGate, BaselineOfOtherWorkWarns) {
  const json checks = tp::baseline_checks(baseline_report(100, 0.1, "h1"),
                                          baseline_report(100, 0.1, "h2"), 0.9, "golden.json");
  ASSERT_EQ(checks.size(), 14u);
  const json& same = checks.back();
  EXPECT_EQ(same["name"], "baseline_same_work");
  EXPECT_EQ(same["status"], "warn");
  EXPECT_EQ(same["value"], nullptr);
  EXPECT_EQ(same["reason"],
            "scenario hashes differ (golden h1, new h2): this compares different work");
  EXPECT_EQ(tp::baseline_checks(baseline_report(100, 0.1, "h1"), baseline_report(100, 0.1, "h1"),
                                0.9, "golden.json")
                .size(),
            13u)
      << "the same work gives no baseline_same_work";
}

// The default straggler threshold is advice: a slow rank under it is WARN, as a straggler is in
// trainproof train. The same threshold set by someone is a gate and FAILs.
TEST(AcceptGate, ADefaultThresholdWarnsWhereASetOneFails) {
  const json report = {{"ranks",
                        {{{"rank", 0}, {"host", "n0"}, {"straggler_score", 0.72}},
                         {{"rank", 1}, {"host", "n1"}, {"straggler_score", 1.0}},
                         {{"rank", 2}, {"host", "n2"}, {"straggler_score", 1.1}}}}};
  tp::GateThreshold set = gate("min_straggler_score", tp::Direction::at_least, 0.8, "train",
                               "every rank's straggler score");
  tp::GateThreshold by_default = set;
  by_default.advisory = true;
  const json failed = tp::judge_thresholds(gated({set}), report, {{"train", 1}});
  EXPECT_EQ(failed[0]["status"], "fail");
  const json warned = tp::judge_thresholds(gated({by_default}), report, {{"train", 1}});
  EXPECT_EQ(warned[0]["status"], "warn");
  EXPECT_THAT(warned[0]["reason"].get<std::string>(), HasSubstr("a default, so WARN"));
  EXPECT_FALSE(tp::stage_failed(gated({by_default}), "train", report, json::array()));
}

// With 2 ranks the median is their mean: one noisy rank would be named, so nothing is judged.
TEST(AcceptGate, AStragglerNeedsThreeRanksToCompareAgainst) {
  const json report = {{"ranks",
                        {{{"rank", 0}, {"host", "n0"}, {"straggler_score", 0.72}},
                         {{"rank", 1}, {"host", "n1"}, {"straggler_score", 1.4}}}}};
  const json checks = tp::judge_thresholds(
      gated({gate("min_straggler_score", tp::Direction::at_least, 0.8, "train", "score")}), report,
      {{"train", 1}});
  EXPECT_EQ(checks[0]["status"], "n/a");
  EXPECT_THAT(checks[0]["reason"].get<std::string>(),
              HasSubstr("2 rank(s): a straggler needs at least 3 ranks to compare against"));
}

}  // namespace

namespace {

// A rail too large for its matrix in the report: gate.min_pair_gbps reads its slowest pairs.
TEST(AcceptGate, TheSlowestPairOfALargeRailIsReadFromItsSummary) {
  tp::AcceptConfig c = gated({kMinPair});
  json hosts = json::array();
  for (int i = 0; i < 512; ++i) {
    std::string host = "n";  // "n" + std::to_string trips GCC 12's -Wrestrict
    host += std::to_string(1000 + i);
    hosts.push_back(host);
  }
  const json rail = {{"hosts", hosts},
                     {"one_way_gbps", nullptr},
                     {"matrices_in_trace", "pairwise/rail0/"},
                     {"one_way",
                      {{"slowest",
                        {{{"from", "n1007"}, {"to", "n1042"}, {"gbps", 4.0}},
                         {{"from", "n1001"}, {"to", "n1002"}, {"gbps", 9.0}}}}}}};
  const json report = {{"sweep", {{"pairwise", {{"rails", {rail}}}}}}};
  const json checks = tp::judge_thresholds(c, report, {{"pairwise", 1}});
  const json& pair = named(checks, "min_pair_gbps");
  EXPECT_EQ(pair["value"], 4.0);
  EXPECT_EQ(pair["status"], "fail");
  EXPECT_THAT(pair["reason"].get<std::string>(), StartsWith("nodes n1007 to n1042: "));
}

}  // namespace
