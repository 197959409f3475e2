#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "app/report/report.h"

#include "app/job/cost.h"
#include "app/job/job_report.h"
#include "app/job/job_timeline.h"
#include "app/report/summary.h"
#include "tests/unit/golden.h"

namespace {

using nlohmann::json;
using tp::test::expect_golden;

// Four ranks on two hosts, ten measured steps. Rank 1 computes 10x slower than the rest.
tp::RunRecord sample_run(double rank1_compute = 0.100) {
  tp::RunRecord run;
  run.config.model = {3, 32, 8, 8};
  run.config.steps = 12;
  run.config.warmup_steps = 2;
  run.steps_run = 12;
  run.comm_timing_method = "test";
  for (int i = 0; i < 10; ++i) run.bucket_seconds.push_back({0.001 + 0.0001 * i});  // one bucket
  run.collective = {0, 8192, -1};
  run.context = {{"tool", {{"version", "0.1.0"}}},
                 {"world_size", 4},
                 {"hosts", {"node-a", "node-b"}},
                 {"backends", {{"compute", "cpu"}, {"comm", "mpi"}}},
                 {"warnings", json::array()}};
  for (int r = 0; r < 4; ++r) {
    tp::RankInfo info;
    info.rank = r;
    info.host = std::string(r < 2 ? "node-a" : "node-b");
    info.local_rank = r % 2;
    info.device = std::string("cpu");
    info.cpu_affinity = std::to_string(r);
    info.numa_nodes = std::string("0");
    info.gemm_rate_flops = 1e10;
    run.ranks.push_back(info);
    run.digests.push_back("00112233445566778899aabbccddeeff");
    std::vector<tp::StepTiming> steps;
    for (int i = 0; i < 10; ++i) {
      const double compute = r == 1 ? rank1_compute : 0.010 + 0.0001 * i;
      const double arrival = 100.0 + i + compute;  // later compute, later arrival
      steps.push_back({0.001, compute, 0.002, 0.001, 0.0005, 0.0, 0.0125 + compute, arrival});
    }
    run.timings.push_back(steps);
  }
  return run;
}

// A rank whose NIC sits on another NUMA node than its GPU is its node's affinity finding, and the
// flagged_nodes check names the node.
TEST(Report, ARankWhoseNicIsFarFromItsGpuFlagsItsNode) {
  tp::RunRecord run = sample_run(0.0101);  // no straggler
  for (tp::RankInfo& r : run.ranks) {
    r.gpu_uuid = "GPU-" + std::to_string(r.rank);
    r.gpu_pci_bus_id = "0000:1b:00.0";
    r.gpu_numa_node = 0;
    r.nic = "mlx5_0";
    r.nic_source = "NUMA node 0";
    r.nic_numa_node = 0;
  }
  run.ranks[3].nic = "mlx5_3";
  run.ranks[3].nic_source = "NCCL_IB_HCA";
  run.ranks[3].nic_numa_node = 1;
  const json report = tp::build_report(run);
  EXPECT_EQ(report["ranks"][3]["nic"]["name"], "mlx5_3");
  EXPECT_EQ(report["nodes"][0]["flagged"], false);
  ASSERT_EQ(report["nodes"][1]["findings"].size(), 1u) << report["nodes"].dump(1);
  const json& finding = report["nodes"][1]["findings"][0];
  EXPECT_EQ(finding["check"], "affinity");
  EXPECT_EQ(finding["status"], "warn");
  EXPECT_NE(
      finding["reason"].get<std::string>().find("its NIC mlx5_3 (NCCL_IB_HCA) is on NUMA node 1"),
      std::string::npos);
  json flagged;
  for (const json& c : report["gate"]["checks"])
    if (c["name"] == "flagged_nodes") flagged = c;
  EXPECT_EQ(flagged["reason"], "flagged: node-b");
}

TEST(Report, FlagsExactlyTheStragglerAndItsNode) {
  const json report = tp::build_report(sample_run());
  EXPECT_EQ(report["schema"], "trainproof.report/3");
  EXPECT_EQ(report["verdict"], "WARN");
  for (const auto& rank : report["ranks"])
    EXPECT_EQ(rank["flagged"].get<bool>(), rank["rank"] == 1) << rank.dump();
  EXPECT_TRUE(report["nodes"][0]["flagged"].get<bool>());
  EXPECT_FALSE(report["nodes"][1]["flagged"].get<bool>());
  EXPECT_NE(report["nodes"][0]["reasons"][0].get<std::string>().find("rank 1"), std::string::npos);
  EXPECT_NEAR(report["ranks"][1]["straggler_score"].get<double>(), 0.01045 / 0.1, 1e-3);
}

TEST(Report, BalancedRunPasses) {
  const json report = tp::build_report(sample_run(0.0101));
  EXPECT_EQ(report["verdict"], "PASS");
  EXPECT_EQ(report["train"]["final_digest"], "00112233445566778899aabbccddeeff");
}

TEST(Report, ArrivalSkewIsRelativeToTheEarliestRank) {
  const json report = tp::build_report(sample_run());
  EXPECT_NEAR(report["ranks"][1]["arrival_skew"]["p50"].get<double>(), 0.1 - 0.01045, 1e-9);
  EXPECT_NEAR(report["ranks"][0]["arrival_skew"]["p50"].get<double>(), 0.0, 1e-9);
}

const json& check_named(const json& report, const std::string& name) {
  for (const json& check : report["gate"]["checks"])
    if (check["name"] == name) return check;
  static const json none;
  return none;
}

// Two ranks on one node: no straggler can be named. The topology is still compared (a degraded
// link flags a node of one); without it, nothing was measured, so the check is n/a.
TEST(Report, FlaggedNodesSaysWhatWasComparedAndIsNotApplicableWithNothing) {
  tp::RunRecord run = sample_run(0.010);
  run.ranks.resize(2);
  run.timings.resize(2);
  run.digests.resize(2);
  for (tp::RankInfo& r : run.ranks) r.host = "node-a";
  EXPECT_EQ(check_named(tp::build_report(run), "flagged_nodes")["reason"],
            "no node flagged (compared: topology)");
  run.topology_measured = false;
  const json check = check_named(tp::build_report(run), "flagged_nodes");
  EXPECT_EQ(check["status"], "n/a");
  EXPECT_EQ(check["reason"],
            "2 rank(s) on 1 node(s): none to compare a node against (a straggler needs 3 ranks "
            "or nodes), and no topology read by this stage");
  EXPECT_EQ(check_named(tp::build_report(sample_run(0.010)), "flagged_nodes")["reason"],
            "no node flagged (compared: ranks' compute, topology)");
}

// With two ranks no straggler can be named (the median is their mean): the slow rank is not
// marked FLAGGED beside "flagged nodes: none".
TEST(Report, NoRankIsFlaggedWhereNoNodeCouldBe) {
  tp::RunRecord run = sample_run();
  run.ranks.resize(2);
  run.timings.resize(2);
  run.digests.resize(2);
  const json report = tp::build_report(run);
  for (const auto& rank : report["ranks"]) EXPECT_FALSE(rank["flagged"].get<bool>()) << rank;
  const std::string text = tp::render_summary(report, 4);
  EXPECT_EQ(text.find("FLAGGED"), std::string::npos) << text;
  EXPECT_NE(text.find("flagged nodes: none"), std::string::npos) << text;
}

TEST(Report, ThroughputAndUtilisation) {
  const json report = tp::build_report(sample_run(0.0101));
  const json& train = report["train"];
  // Slowest rank's step each iteration; AU = compute / step summed over ranks and steps.
  EXPECT_GT(train["au"].get<double>(), 0.4);
  EXPECT_LT(train["au"].get<double>(), 0.5);
  const double mean_step = 8.0 / train["samples_per_s"].get<double>();
  EXPECT_NEAR(train["tokens_per_s"].get<double>(), 64.0 / mean_step, 1e-6);
  const tp::ModelSpec model{3, 32, 8, 8};
  EXPECT_NEAR(train["achieved_flops"].get<double>(), model.flops_per_step() / mean_step, 1.0);
}

TEST(Report, ReplicaMismatchFailsAndNamesTheRank) {
  auto run = sample_run(0.0101);
  run.digests[2] = "ffffffffffffffffffffffffffffffff";
  const json report = tp::build_report(run);
  EXPECT_EQ(report["verdict"], "FAIL");
  const json& check = report["gate"]["checks"][0];
  EXPECT_EQ(check["name"], "replica_digest");
  EXPECT_EQ(check["status"], "fail");
  EXPECT_NE(check["reason"].get<std::string>().find("ranks 2 "), std::string::npos);
  EXPECT_EQ(tp::exit_code_for(report["verdict"]), 1);
}

TEST(Report, WrongCollectiveFails) {
  auto run = sample_run(0.0101);
  run.collective = {3, 8192, 1};
  const json report = tp::build_report(run);
  EXPECT_EQ(report["verdict"], "FAIL");
  EXPECT_NE(report["gate"]["checks"][1]["reason"].get<std::string>().find("rank 1"),
            std::string::npos);
}

// Nothing measured is never PASS (docs/report.md, "Verdict").
TEST(Report, RunThatExecutedNoStepIsNone) {
  auto run = sample_run(0.0101);
  run.steps_run = 0;
  for (auto& steps : run.timings) steps.clear();
  run.restored = tp::CheckpointRestore{};
  run.restored->step = 12;
  const json report = tp::build_report(run);
  EXPECT_EQ(report["verdict"], "NONE");
  const json& check = report["gate"]["checks"].back();
  EXPECT_EQ(check["name"], "measured_steps");
  EXPECT_EQ(check["status"], "none");
  EXPECT_NE(check["reason"].get<std::string>().find("training already complete at step 12"),
            std::string::npos)
      << check.dump();
  EXPECT_EQ(tp::exit_code_for("NONE"), 0);
  EXPECT_NE(tp::render_summary(report).find("verdict: NONE"), std::string::npos);
}

TEST(Report, RunOfOnlyWarmUpStepsWarns) {
  auto run = sample_run(0.0101);
  run.steps_run = 2;
  for (auto& steps : run.timings) steps.clear();
  const json report = tp::build_report(run);
  EXPECT_EQ(report["verdict"], "WARN");
  const json& check = report["gate"]["checks"].back();
  EXPECT_EQ(check["status"], "warn");
  EXPECT_NE(check["reason"].get<std::string>().find("warm-up"), std::string::npos);
}

TEST(Report, FailStillWinsOverNothingMeasured) {
  auto run = sample_run(0.0101);
  run.steps_run = 0;
  for (auto& steps : run.timings) steps.clear();
  run.digests[1] = "ffffffffffffffffffffffffffffffff";
  EXPECT_EQ(tp::build_report(run)["verdict"], "FAIL");
}

// A report is input too: its strings reach the terminal only as visible text.
TEST(Report, SummaryShowsControlCharactersAsEscapes) {
  auto run = sample_run(0.0101);
  run.ranks[0].host = "node\x1b[2J\x1b]0;owned\x07\nverdict: FORGED\xc2\x9b";
  const std::string summary = tp::render_summary(tp::build_report(run));
  EXPECT_EQ(summary.find('\x1b'), std::string::npos);
  EXPECT_EQ(summary.find('\x07'), std::string::npos);
  EXPECT_EQ(summary.find("\xc2\x9b"), std::string::npos);  // C1 CSI, in UTF-8
  EXPECT_EQ(summary.find("\nverdict: FORGED"), std::string::npos);
  EXPECT_NE(summary.find("node\\x1B[2J"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\\nverdict: FORGED"), std::string::npos) << summary;
}

// Two async shared-file saves and a restore that set one damaged checkpoint aside.
tp::RunRecord checkpoint_run() {
  tp::RunRecord run = sample_run();
  run.config.checkpoint_dir = "ckpt";
  run.config.checkpoint_every = 4;
  run.config.checkpoint_layout = "shared-file";
  run.config.checkpoint_async = true;
  for (int64_t step : {8, 12}) {
    tp::CheckpointSave save;
    save.step = step;
    save.bytes = 400000000;
    save.first_start = 10.0;
    save.last_end = 10.5;  // 0.8 GB/s aggregate
    save.rank_gbps = {0.19, 0.21, 0.2, 0.2};
    save.total_s = 0.75;
    save.stall_s = 0.002;
    run.saves.push_back(save);
  }
  tp::CheckpointRestore restored;
  restored.step = 4;
  restored.folder = "ckpt/step-00000004";
  restored.bytes = 400000000;
  restored.seconds = 0.25;
  restored.rejected = {"ckpt/step-00000008: ckpt/step-00000008/state.h5 has 10 bytes"};
  restored.written_world_size = 8;  // a restore at another world size (4 ranks here)
  run.restored = restored;
  return run;
}

// An async writer without a core of its own takes turns with the step (docs/report.md).
TEST(Report, AsyncCheckpointsWarnWhenARankHasOneCore) {
  tp::RunRecord run = checkpoint_run();
  const auto warned = [](const json& report) {
    for (const auto& w : report["context"]["warnings"])
      if (w.get<std::string>().find("async checkpoint writer") != std::string::npos) return true;
    return false;
  };
  run.cpu_share = {2, 2, 1, 2};
  json report = tp::build_report(run);
  EXPECT_TRUE(warned(report)) << report["context"].dump();
  EXPECT_NE(report["checkpoint"]["cpu_warning"].get<std::string>().find("rank 2 has 1 CPU"),
            std::string::npos);
  run.cpu_share = {2, 2, 2, 2};
  EXPECT_FALSE(warned(tp::build_report(run)));
  run.cpu_share = {1, 1, 1, 1};
  run.config.checkpoint_async = false;
  EXPECT_FALSE(warned(tp::build_report(run)));
}

// The checkpoint overhead (docs/report.md): the median stall over itself plus checkpoint.every
// steps' median with the checkpoint phase taken out, said once in the summary.
TEST(Report, CheckpointOverheadIsTheShareOfTrainingTimeCheckpointsTake) {
  tp::RunRecord run = checkpoint_run();
  for (auto& steps : run.timings)
    for (size_t i = 0; i < steps.size(); ++i) {
      steps[i].compute = 0.010;
      steps[i].step = 0.0125 + 0.010;  // 22.5 ms without a checkpoint
      if (i % 4 == 3) {
        steps[i].checkpoint = 0.030;
        steps[i].step += 0.030;
      }
    }
  run.saves[0].stall_s = 0.020;
  run.saves[1].stall_s = 0.018;
  const json report = tp::build_report(run);
  EXPECT_NEAR(report["checkpoint"]["training_between_s"].get<double>(), 4 * 0.0225, 1e-12);
  EXPECT_NEAR(report["checkpoint"]["overhead"].get<double>(), 0.019 / (0.019 + 4 * 0.0225), 1e-9);
  EXPECT_NE(tp::render_summary(report).find(
                "  checkpoints took 17% of training time: a stall of 0.019 s a save against "
                "0.09 s of training between saves (medians)"),
            std::string::npos)
      << tp::render_summary(report);
  // Saves longer than the training between them: said in words, and still a share below 100%.
  run.saves[0].stall_s = run.saves[1].stall_s = 0.27;
  const std::string slow = tp::render_summary(tp::build_report(run));
  EXPECT_NE(slow.find("checkpoints took 75% of training time: a stall of 0.27 s a save against "
                      "0.09 s of training between saves (medians), longer than the training "
                      "between them"),
            std::string::npos)
      << slow;
}

TEST(Report, CheckpointOverheadIsNullWithoutSaves) {
  tp::RunRecord run = checkpoint_run();
  run.saves.clear();
  EXPECT_TRUE(tp::build_report(run).at("checkpoint").at("overhead").is_null());
}

// A /2 report's stall_fraction f (stall over the training between saves) reads as the same share.
TEST(Report, AnOlderReportsStallFractionReadsAsTheOverhead) {
  json report = tp::build_report(checkpoint_run());
  report["schema"] = "trainproof.report/2";
  report["checkpoint"].erase("overhead");
  report["checkpoint"].erase("training_between_s");
  report["checkpoint"]["stall_fraction"] = 1.0;
  EXPECT_NE(tp::render_summary(report).find("checkpoints took 50% of training time"),
            std::string::npos)
      << tp::render_summary(report);
}

// Each save names its parts, so a slow one can be pointed at; sync saves give the bytes over the
// stall, async ones the time until the checkpoint was durable.
TEST(Report, SavesCarryTheirPartsAndWhatTheUserPaid) {
  tp::RunRecord run = checkpoint_run();
  run.saves[0].serialize_s = 0.1;
  run.saves[0].write_s = 0.3;
  run.saves[0].max_fsync_s = 0.2;
  run.saves[0].time_to_durable_s = 0.9;
  json save = tp::build_report(run)["checkpoint"]["saves"][0];
  EXPECT_EQ(save["serialize_s"], 0.1);
  EXPECT_EQ(save["write_s"], 0.3);
  EXPECT_EQ(save["fsync_s"], 0.2);
  EXPECT_EQ(save["time_to_durable_s"], 0.9);
  EXPECT_FALSE(save.contains("effective_gbps")) << "async: training did not wait for the bytes";

  run.config.checkpoint_async = false;
  run.saves[0].stall_s = 0.5;
  save = tp::build_report(run)["checkpoint"]["saves"][0];
  EXPECT_NEAR(save["effective_gbps"].get<double>(), 0.8, 1e-9);  // 400 MB over 0.5 s
  EXPECT_FALSE(save.contains("time_to_durable_s"));
  run.saves[0].stall_s = 0;
  EXPECT_TRUE(tp::build_report(run)["checkpoint"]["saves"][0]["effective_gbps"].is_null());
}

// Golden output: the summary is a user interface; any change to it must be deliberate.
// Regenerate with TRAINPROOF_UPDATE_GOLDEN=1.
TEST(Report, SummaryMatchesGolden) {
  expect_golden(tp::render_summary(tp::build_report(sample_run())), "summary.golden");
}

TEST(Report, SummaryWithCheckpointsMatchesGolden) {
  const tp::RunRecord run = checkpoint_run();
  const json report = tp::build_report(run);
  EXPECT_EQ(report["checkpoint"]["layout"], "shared-file");
  EXPECT_NEAR(report["checkpoint"]["write_gbps"].get<double>(), 0.8, 1e-9);
  EXPECT_NEAR(report["checkpoint"]["restore_gbps"].get<double>(), 1.6, 1e-9);
  expect_golden(tp::render_summary(report), "summary-checkpoints.golden");
}

// The timeline and cost lines of a priced run with checkpoints: two ranks on a fake clock, 3.6
// per node-hour on the run's one host, with a failure projection.
TEST(Report, SummaryWithTimelineAndCostMatchesGolden) {
  json report = tp::build_report(checkpoint_run());
  std::vector<tp::RankTimeline> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.push_back({r,
                     20.0 + r,
                     {{"launch", 1.0},
                      {"setup", 2.0 + r},
                      {"warmup_steps", 1.0},
                      {"productive", 12.0},
                      {"data_stall", 1.0},
                      {"comm_exposed", 2.0},
                      {"checkpoint_stall", 0.5},
                      {"teardown", 0.5}}});
  report["job"] = tp::job_json(ranks, 30.0, "Slurm job 42: SubmitTime to StartTime");
  report["cost"] = tp::cost_json(tp::CostRates{3.6, 0, 0.02, 0.01, 0.1, 0.5, "USD"},
                                 tp::cost_inputs_from(report));
  expect_golden(tp::render_summary(report), "summary-timeline-cost.golden");
}

// An acceptance run's summary leads with its verdict and stages, and names both goodputs: the
// job's alone (0.2 here) counts the sweep as lost time.
TEST(Report, AnAcceptanceSummaryLeadsWithTheVerdictTheStagesAndBothGoodputs) {
  json report = tp::build_report(sample_run());
  report["accept"] = {
      {"attempts",
       {{{"stage", "sweep"}, {"verdict", "PASS"}}, {{"stage", "train"}, {"verdict", "WARN"}}}}};
  report["job"] = tp::job_json({tp::RankTimeline{0,
                                                 60.0,
                                                 {{"launch", 2.0},
                                                  {"sweep", 40.0},
                                                  {"setup", 1.0},
                                                  {"productive", 12.0},
                                                  {"teardown", 5.0}}}},
                               {});
  const std::string text = tp::render_summary(report);
  EXPECT_EQ(text.substr(0, text.find("trainproof 0.1.0")),
            "acceptance verdict: WARN\n"
            "accept stages: sweep PASS, train WARN\n"
            "goodput: training stage 0.67, whole job 0.20 (launch and sweep are not training)\n")
      << text;
}

// The report is a contract (docs/report.md): any change to its JSON, key by key, must be
// deliberate. Regenerate with TRAINPROOF_UPDATE_GOLDEN=1.
TEST(Report, JsonMatchesGolden) {
  expect_golden(tp::build_report(sample_run()).dump(2) + "\n", "report.golden.json");
}

TEST(Report, JsonWithCheckpointsMatchesGolden) {
  expect_golden(tp::build_report(checkpoint_run()).dump(2) + "\n",
                "report-checkpoints.golden.json");
}

// With a sweep in the same report, each bucket size is held against the sweep's allreduce row of
// the same backend at the nearest size not below it.
TEST(Report, SummaryHoldsEachBucketSizeAgainstTheSweepInTheSameReport) {
  json report = tp::build_report(sample_run());
  const double bucket_busbw = report["train"]["buckets"][0]["busbw_gbps"];
  report["sweep"] = {{"backend", "mpi"},
                     {"split", "none"},
                     {"results", json::array({{{"group", "world"},
                                               {"op", "allreduce"},
                                               {"dtype", "float32"},
                                               {"bytes", 16384},
                                               {"in_place", true},
                                               {"not_run", ""},
                                               {"busbw_gbps", 4 * bucket_busbw}}})}};
  const std::string text = tp::render_summary(report);
  EXPECT_NE(text.find("12 KiB x1: 1.450 ms, busbw 0.0127 GB/s, 25% of the sweep's 0.0508 GB/s "
                      "at 16 KiB"),
            std::string::npos)
      << text;
}

}  // namespace
