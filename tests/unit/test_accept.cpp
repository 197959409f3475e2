#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "app/accept_config.h"
#include "app/accept_gate.h"
#include "app/accept_preflight.h"
#include "app/accept_report.h"
#include "app/accept_restore.h"
#include "app/cli.h"
#include "app/cli_options.h"
#include "app/gate.h"
#include "app/job_report.h"
#include "common/errors.h"

namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;
namespace po = boost::program_options;
namespace fs = std::filesystem;

using Sources = std::map<std::string, std::string>;

// accept_config_from

po::variables_map parse(const std::vector<std::string>& args) {
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(tp::option_registry()).run(), vm);
  po::notify(vm);
  return vm;
}

// Every option given on the command line, as parse_invocation records them.
Sources from_command_line(const std::vector<std::string>& args) {
  Sources sources;
  for (const std::string& a : args)
    if (a.rfind("--", 0) == 0) sources[a.substr(2, a.find('=') - 2)] = "command line";
  return sources;
}

tp::AcceptConfig accept(const std::vector<std::string>& args, const Sources& sources) {
  const po::variables_map vm = parse(args);
  return tp::accept_config_from(vm, sources, tp::train_config_from(vm));
}
tp::AcceptConfig accept(const std::vector<std::string>& args) {
  return accept(args, from_command_line(args));
}

// The UsageError's message, or a failure when the options were accepted.
std::string refusal(const std::vector<std::string>& args, const Sources& sources) {
  try {
    accept(args, sources);
  } catch (const tp::UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << ::testing::PrintToString(args);
  return "";
}
std::string refusal(const std::vector<std::string>& args) {
  return refusal(args, from_command_line(args));
}

bool has_threshold(const tp::AcceptConfig& c, const std::string& check) {
  for (const tp::GateThreshold& t : c.thresholds)
    if (t.threshold.check == check) return true;
  return false;
}

const tp::GateThreshold& threshold_named(const tp::AcceptConfig& c, const std::string& check) {
  for (const tp::GateThreshold& t : c.thresholds)
    if (t.threshold.check == check) return t;
  static const tp::GateThreshold none;
  ADD_FAILURE() << "no threshold " << check;
  return none;
}

std::vector<std::string> threshold_names(const tp::AcceptConfig& c) {
  std::vector<std::string> names;
  for (const tp::GateThreshold& t : c.thresholds) names.push_back(t.threshold.check);
  return names;
}

// What the restore stage needs: a checkpoint every 10 of the default 50 steps.
const std::vector<std::string> kCheckpointed = {"--checkpoint.dir=/tmp/ck",
                                                "--checkpoint.every=10"};

std::vector<std::string> with_checkpoints(std::vector<std::string> args) {
  args.insert(args.end(), kCheckpointed.begin(), kCheckpointed.end());
  return args;
}

TEST(AcceptConfig, AllRunsEveryStageInOrder) {
  const tp::AcceptConfig c = accept(with_checkpoints({}));
  EXPECT_EQ(c.stages, tp::kAcceptStages);
  EXPECT_EQ(c.stages,
            (std::vector<std::string>{"preflight", "sweep", "pairwise", "train", "restore"}));
  EXPECT_TRUE(c.runs("pairwise"));
  EXPECT_FALSE(c.runs("drill")) << "the drill is never a stage of accept";
  EXPECT_EQ(accept(with_checkpoints({"--accept.stages=all"})).stages, tp::kAcceptStages);
}

TEST(AcceptConfig, AListInAnyOrderComesBackInRunOrder) {
  const tp::AcceptConfig c = accept({"--accept.stages=train, sweep ,preflight"});
  EXPECT_EQ(c.stages, (std::vector<std::string>{"preflight", "sweep", "train"}));
  EXPECT_FALSE(c.runs("pairwise"));
  EXPECT_FALSE(c.runs("restore"));
  EXPECT_EQ(accept({"--accept.stages=sweep,sweep"}).stages, std::vector<std::string>{"sweep"});
}

TEST(AcceptConfig, UnknownStageIsNamed) {
  EXPECT_EQ(refusal({"--accept.stages=train,drill"}),
            "accept.stages: unknown stage 'drill' (known: preflight, sweep, pairwise, train, "
            "restore, or all)");
}

TEST(AcceptConfig, EmptyStageListIsRefused) {
  EXPECT_EQ(refusal({"--accept.stages", ""}), "accept.stages is empty (give stages, or all)");
  EXPECT_EQ(refusal({"--accept.stages= , ,"}), "accept.stages is empty (give stages, or all)");
}

TEST(AcceptConfig, ScalarsAreReadAndDefaulted) {
  const tp::AcceptConfig d = accept({"--accept.stages=train"});
  EXPECT_EQ(d.warn_margin, 0.05);
  EXPECT_EQ(d.retries, 0);
  EXPECT_EQ(d.busbw_bytes, int64_t(64) << 20);
  EXPECT_EQ(d.expected_hash, "");
  EXPECT_EQ(d.baseline, "");
  EXPECT_EQ(d.tolerance, 0.9);
  const tp::AcceptConfig c =
      accept({"--accept.stages=train", "--gate.warn_margin=0.1", "--gate.retries=2",
              "--gate.busbw_bytes=1048576", "--gate.scenario_hash=abc", "--baseline=golden.json",
              "--tolerance=0.8"});
  EXPECT_EQ(c.warn_margin, 0.1);
  EXPECT_EQ(c.retries, 2);
  EXPECT_EQ(c.busbw_bytes, 1048576);
  EXPECT_EQ(c.expected_hash, "abc");
  EXPECT_EQ(c.baseline, "golden.json");
  EXPECT_EQ(c.tolerance, 0.8);
  EXPECT_THAT(refusal({"--accept.stages=train", "--gate.retries=11"}), HasSubstr("gate.retries"));
  EXPECT_EQ(refusal({"--accept.stages=train", "--gate.busbw_bytes=0"}),
            "gate.busbw_bytes must be >= 1, got 0");
}

TEST(AcceptConfig, OnlyTheStragglerScoreHasADefaultThreshold) {
  const tp::AcceptConfig c = accept({"--accept.stages=train"});
  ASSERT_EQ(c.thresholds.size(), 1u);
  const tp::GateThreshold& t = c.thresholds[0];
  EXPECT_EQ(t.threshold.check, "min_straggler_score");
  EXPECT_EQ(t.threshold.direction, tp::Direction::at_least);
  EXPECT_EQ(t.threshold.limit, 0.8);
  EXPECT_EQ(t.threshold.source, "the default gate.min_straggler_score");
  EXPECT_EQ(t.stage, "train");
  EXPECT_EQ(t.metric, "every rank's straggler score");
}

TEST(AcceptConfig, EachThresholdSaysWhereItCameFrom) {
  const Sources sources = {{"gate.min_au", "command line"},
                           {"gate.max_step_cv", "gate.file hosts/h200.ini"},
                           {"gate.min_goodput", "scenario accept.ini"}};
  const tp::AcceptConfig c =
      accept({"--accept.stages=train", "--gate.min_au=0.5", "--gate.max_step_cv=0.1",
              "--gate.min_goodput=0.7", "--gate.min_straggler_score=0"},
             sources);
  // In the order of the [gate] section; a threshold of 0 is not checked.
  EXPECT_EQ(threshold_names(c), (std::vector<std::string>{"max_step_cv", "min_au", "min_goodput"}));
  EXPECT_EQ(threshold_named(c, "min_au").threshold.source, "--gate.min_au on the command line");
  EXPECT_EQ(threshold_named(c, "max_step_cv").threshold.source,
            "gate.max_step_cv in gate.file hosts/h200.ini");
  EXPECT_EQ(threshold_named(c, "max_step_cv").threshold.direction, tp::Direction::at_most);
  EXPECT_EQ(threshold_named(c, "min_goodput").threshold.source,
            "gate.min_goodput in scenario accept.ini");
  EXPECT_EQ(threshold_named(c, "min_goodput").threshold.limit, 0.7);
}

TEST(AcceptConfig, SourcesRecordedByTheRealParserAreQuoted) {
  const std::string dir = ::testing::TempDir();
  const std::string scenario = dir + "accept_scenario.ini";
  const std::string host = dir + "accept_host.ini";
  std::ofstream(scenario) << "[accept]\nstages = train\n[gate]\nmin_au = 0.4\n";
  std::ofstream(host) << "[gate]\nmin_au = 0.9\nmax_step_cv = 0.2\n";
  const char* argv[] = {"trainproof",
                        "accept",
                        "--scenario",
                        scenario.c_str(),
                        "--gate.file",
                        host.c_str(),
                        "--gate.min_goodput=0.6"};
  const tp::Invocation inv = tp::parse_invocation(int(std::size(argv)), argv);
  const tp::AcceptConfig c =
      tp::accept_config_from(inv.options, inv.option_source, tp::train_config_from(inv.options));
  EXPECT_EQ(c.stages, std::vector<std::string>{"train"});
  // The scenario's min_au wins over the host file's, and says so.
  EXPECT_EQ(threshold_named(c, "min_au").threshold.limit, 0.4);
  EXPECT_EQ(threshold_named(c, "min_au").threshold.source, "gate.min_au in scenario " + scenario);
  EXPECT_EQ(threshold_named(c, "max_step_cv").threshold.source,
            "gate.max_step_cv in gate.file " + host);
  EXPECT_EQ(threshold_named(c, "min_goodput").threshold.source,
            "--gate.min_goodput on the command line");
  EXPECT_EQ(threshold_named(c, "min_straggler_score").threshold.source,
            "the default gate.min_straggler_score");
}

TEST(AcceptConfig, CommandLineThresholdForAStageLeftOutIsRefused) {
  EXPECT_EQ(refusal({"--accept.stages=preflight,train", "--gate.min_pair_gbps=10"}),
            "--gate.min_pair_gbps on the command line judges the bandwidth of every pair of "
            "nodes, which only stage pairwise measures, and accept.stages leaves pairwise out");
  EXPECT_EQ(refusal({"--accept.stages=sweep", "--gate.min_au=0.5"}),
            "--gate.min_au on the command line judges the accelerator utilisation, which only "
            "stage train measures, and accept.stages leaves train out");
  EXPECT_THAT(refusal({"--accept.stages=train", "--gate.max_restore_s=60"}),
              HasSubstr("only stage restore measures, and accept.stages leaves restore out"));
  // 0 is "not checked", so it is never refused.
  EXPECT_NO_THROW(accept({"--accept.stages=sweep", "--gate.min_au=0", "--gate.min_busbw_gbps=1"}));
}

TEST(AcceptConfig, FileThresholdForAStageLeftOutIsKeptAndJudgedNotApplicable) {
  const Sources sources = {{"gate.min_pair_gbps", "scenario accept.ini"},
                           {"gate.max_restore_s", "gate.file hosts/h200.ini"}};
  const tp::AcceptConfig c = accept(
      {"--accept.stages=train", "--gate.min_pair_gbps=10", "--gate.max_restore_s=60"}, sources);
  ASSERT_TRUE(has_threshold(c, "min_pair_gbps"));
  EXPECT_EQ(threshold_named(c, "min_pair_gbps").stage, "pairwise");
  ASSERT_TRUE(has_threshold(c, "max_restore_s"));
  const json checks = tp::judge_thresholds(c, json::object(), {{"train", 1}});
  ASSERT_EQ(checks.size(), 3u);
  EXPECT_EQ(checks[0]["name"], "min_pair_gbps");
  EXPECT_EQ(checks[0]["status"], "n/a");
  EXPECT_EQ(checks[0]["reason"], "not measured: stage pairwise did not run");
  EXPECT_EQ(checks[2]["name"], "max_restore_s");
  EXPECT_EQ(checks[2]["status"], "n/a");
  EXPECT_EQ(checks[2]["reason"], "not measured: stage restore did not run");
}

TEST(AcceptConfig, CheckpointThresholdsNeedCheckpoints) {
  EXPECT_EQ(refusal({"--accept.stages=train", "--gate.min_ckpt_write_gbps=1"}),
            "--gate.min_ckpt_write_gbps on the command line judges the checkpoint write "
            "bandwidth, which train measures only with checkpoint.dir and checkpoint.every");
  // A folder without a cadence takes no checkpoint either.
  EXPECT_THAT(refusal({"--accept.stages=train", "--checkpoint.dir=/tmp/ck",
                       "--gate.max_ckpt_stall_fraction=0.1"}),
              HasSubstr("--gate.max_ckpt_stall_fraction on the command line judges the "
                        "checkpoint stall fraction"));
  const tp::AcceptConfig c =
      accept(with_checkpoints({"--accept.stages=train", "--gate.min_ckpt_write_gbps=1"}));
  ASSERT_TRUE(has_threshold(c, "min_ckpt_write_gbps"));
  EXPECT_EQ(threshold_named(c, "min_ckpt_write_gbps").threshold.limit, 1.0);
  // From a host file it is kept, and judged n/a when nothing was written.
  EXPECT_NO_THROW(accept({"--accept.stages=train", "--gate.min_ckpt_write_gbps=1"},
                         {{"gate.min_ckpt_write_gbps", "gate.file hosts/h200.ini"}}));
}

TEST(AcceptConfig, RestoreNeedsTrainAndACheckpointOfTheLastStep) {
  EXPECT_EQ(refusal(with_checkpoints({"--accept.stages=restore"})),
            "accept.stages: restore needs train (it restores the checkpoint train wrote)");
  EXPECT_EQ(refusal({"--accept.stages=train,restore"}),
            "accept.stages: restore needs checkpoint.dir and checkpoint.every (or leave restore "
            "out)");
  EXPECT_EQ(refusal({"--accept.stages=train,restore", "--checkpoint.dir=/tmp/ck"}),
            "accept.stages: restore needs checkpoint.dir and checkpoint.every (or leave restore "
            "out)");
  EXPECT_EQ(refusal({"--accept.stages=train,restore", "--checkpoint.dir=/tmp/ck",
                     "--checkpoint.every=7", "--train.steps=50"}),
            "accept.stages: restore checks the last checkpoint against the final state, so "
            "train.steps=50 must be a multiple of checkpoint.every=7");
  EXPECT_EQ(accept({"--accept.stages=train,restore", "--checkpoint.dir=/tmp/ck",
                    "--checkpoint.every=7", "--train.steps=49"})
                .stages,
            (std::vector<std::string>{"train", "restore"}));
  // The default, every stage, includes restore.
  EXPECT_THAT(refusal({}), HasSubstr("restore needs checkpoint.dir"));
}

TEST(AcceptConfig, NegativeThresholdIsRefused) {
  EXPECT_EQ(refusal({"--accept.stages=train", "--gate.min_au=-1"}),
            "gate.min_au must be >= 0 (0: not checked), got -1.000000");
  // Refused wherever it came from, and whichever stage measures it.
  EXPECT_THAT(refusal({"--accept.stages=train", "--gate.min_pair_gbps=-0.5"},
                      {{"gate.min_pair_gbps", "scenario s.ini"}}),
              StartsWith("gate.min_pair_gbps must be >= 0"));
}

TEST(AcceptConfig, DrillAddsAThresholdReportMergeJudges) {
  const tp::AcceptConfig c = accept({"--accept.stages=train", "--gate.drill=true",
                                     "--gate.max_rto_s=60", "--gate.max_rpo_steps=8"});
  EXPECT_EQ(threshold_names(c), (std::vector<std::string>{"min_straggler_score", "max_rto_s",
                                                          "max_rpo_steps", "drill"}));
  const tp::GateThreshold& drill = threshold_named(c, "drill");
  EXPECT_EQ(drill.threshold.direction, tp::Direction::at_least);
  EXPECT_EQ(drill.threshold.limit, 1.0);
  EXPECT_EQ(drill.threshold.source, "--gate.drill on the command line");
  EXPECT_EQ(drill.stage, "drill");
  EXPECT_EQ(drill.metric, "recovery drill's verdict");
  EXPECT_EQ(threshold_named(c, "max_rto_s").stage, "drill");
  EXPECT_FALSE(has_threshold(accept({"--accept.stages=train"}), "drill"));
}

TEST(AcceptConfig, ThresholdsJsonRecordsEveryThresholdForReportMerge) {
  const tp::AcceptConfig c =
      accept({"--accept.stages=train", "--gate.min_au=0.5", "--gate.max_step_cv=0.125"});
  const json expected = json::array({{{"check", "max_step_cv"},
                                      {"direction", "at_most"},
                                      {"limit", 0.125},
                                      {"source", "--gate.max_step_cv on the command line"},
                                      {"stage", "train"},
                                      {"metric", "coefficient of variation of the step time"}},
                                     {{"check", "min_au"},
                                      {"direction", "at_least"},
                                      {"limit", 0.5},
                                      {"source", "--gate.min_au on the command line"},
                                      {"stage", "train"},
                                      {"metric", "accelerator utilisation"}},
                                     {{"check", "min_straggler_score"},
                                      {"direction", "at_least"},
                                      {"limit", 0.8},
                                      {"source", "the default gate.min_straggler_score"},
                                      {"stage", "train"},
                                      {"metric", "every rank's straggler score"}}});
  EXPECT_EQ(tp::thresholds_json(c), expected);
  EXPECT_EQ(tp::thresholds_json(tp::AcceptConfig{}), json::array());
}

// judge_thresholds, stage_failed, baseline_checks

tp::GateThreshold gate(const std::string& check, tp::Direction direction, double limit,
                       const std::string& stage, const std::string& metric) {
  tp::GateThreshold t;
  t.threshold = {check, direction, limit, "--gate." + check + " on the command line"};
  t.stage = stage;
  t.metric = metric;
  return t;
}

tp::AcceptConfig gated(std::vector<tp::GateThreshold> thresholds, double warn_margin = 0.05) {
  tp::AcceptConfig c;
  c.stages = tp::kAcceptStages;
  c.thresholds = std::move(thresholds);
  c.warn_margin = warn_margin;
  return c;
}

const tp::GateThreshold kMinAu =
    gate("min_au", tp::Direction::at_least, 0.5, "train", "accelerator utilisation");
const tp::GateThreshold kMaxStepCv = gate("max_step_cv", tp::Direction::at_most, 0.5, "train",
                                          "coefficient of variation of the step time");
const tp::GateThreshold kMinBusbw = gate("min_busbw_gbps", tp::Direction::at_least, 30, "sweep",
                                         "in-place bus bandwidth per operation");
const tp::GateThreshold kMinPair = gate("min_pair_gbps", tp::Direction::at_least, 10, "pairwise",
                                        "bandwidth of every pair of nodes");

json sweep_row(const std::string& op, int64_t bytes, double busbw, bool in_place = true,
               const std::string& group = "world") {
  return {{"group", group},       {"op", op},      {"bytes", bytes},
          {"in_place", in_place}, {"not_run", ""}, {"algbw_gbps", busbw / 2},
          {"busbw_gbps", busbw}};
}

constexpr int64_t kMiB = int64_t(1) << 20;

// allreduce has rows on both sides of 64 MiB (and faster rows that are not in place or not the
// world group); allgather stops below it; reducescatter's rows are out of size order.
json sweep_report() {
  return {{"sweep",
           {{"results",
             {sweep_row("allreduce", 1 * kMiB, 10), sweep_row("allreduce", 64 * kMiB, 50),
              sweep_row("allreduce", 256 * kMiB, 60), sweep_row("allreduce", 64 * kMiB, 100, false),
              sweep_row("allreduce", 64 * kMiB, 200, true, "node n0"),
              sweep_row("allgather", 1 * kMiB, 5), sweep_row("allgather", 16 * kMiB, 20),
              sweep_row("reducescatter", 256 * kMiB, 45),
              sweep_row("reducescatter", 128 * kMiB, 42), sweep_row("alltoall", 64 * kMiB, 1),
              sweep_row("broadcast", 64 * kMiB, 1), sweep_row("sendrecv", 64 * kMiB, 1)}}}}};
}

const json& named(const json& checks, const std::string& name) {
  for (const json& c : checks)
    if (c.value("name", "") == name) return c;
  static const json none;
  ADD_FAILURE() << "no check " << name << " in " << checks.dump();
  return none;
}

std::vector<std::string> names_of(const json& checks) {
  std::vector<std::string> names;
  for (const json& c : checks) names.push_back(c.value("name", ""));
  return names;
}

TEST(AcceptGate, BusbwIsOneCheckPerGatedOperationAtTheChosenSize) {
  tp::AcceptConfig c = gated({kMinBusbw});
  c.busbw_bytes = 64 * kMiB;
  const json checks = tp::judge_thresholds(c, sweep_report(), {{"sweep", 1}});
  EXPECT_EQ(names_of(checks),
            (std::vector<std::string>{"min_busbw_gbps.allreduce", "min_busbw_gbps.allgather",
                                      "min_busbw_gbps.reducescatter"}));
  // The 64 MiB row itself: the smallest not below 64 MiB.
  const json& allreduce = named(checks, "min_busbw_gbps.allreduce");
  EXPECT_EQ(allreduce["value"], 50.0);
  EXPECT_EQ(allreduce["threshold"], 30.0);
  EXPECT_EQ(allreduce["status"], "pass");
  EXPECT_EQ(allreduce["direction"], "at_least");
  EXPECT_EQ(allreduce["source"], "--gate.min_busbw_gbps on the command line");
  EXPECT_EQ(allreduce["reason"],
            "sweep allreduce: in-place busbw at 67108864 bytes; 50 GB/s is at least 30 GB/s "
            "(limit from --gate.min_busbw_gbps on the command line)");
  // Nothing reached 64 MiB: the largest row it ran.
  const json& allgather = named(checks, "min_busbw_gbps.allgather");
  EXPECT_EQ(allgather["value"], 20.0);
  EXPECT_EQ(allgather["status"], "fail");
  EXPECT_THAT(allgather["reason"].get<std::string>(),
              HasSubstr("in-place busbw at 16777216 bytes; 20 GB/s is below 30 GB/s"));
  // 128 MiB, not the 256 MiB row listed first.
  const json& reducescatter = named(checks, "min_busbw_gbps.reducescatter");
  EXPECT_EQ(reducescatter["value"], 42.0);
  EXPECT_EQ(reducescatter["status"], "pass");
  EXPECT_THAT(reducescatter["reason"].get<std::string>(), HasSubstr("at 134217728 bytes"));
}

TEST(AcceptGate, BusbwSizeFollowsGateBusbwBytes) {
  tp::AcceptConfig c = gated({kMinBusbw});
  c.busbw_bytes = 2 * kMiB;  // between rows: the next one up
  const json small = tp::judge_thresholds(c, sweep_report(), {{"sweep", 1}});
  EXPECT_EQ(named(small, "min_busbw_gbps.allreduce")["value"], 50.0);
  EXPECT_EQ(named(small, "min_busbw_gbps.allgather")["value"], 20.0);
  c.busbw_bytes = 1 * kMiB;
  const json smallest = tp::judge_thresholds(c, sweep_report(), {{"sweep", 1}});
  EXPECT_EQ(named(smallest, "min_busbw_gbps.allreduce")["value"], 10.0);
  EXPECT_EQ(named(smallest, "min_busbw_gbps.allgather")["value"], 5.0);
  EXPECT_EQ(named(smallest, "min_busbw_gbps.reducescatter")["value"], 42.0);
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
            "nodes n2 to n1: slowest pair of nodes, one direction at a time; 9 GB/s is below "
            "10 GB/s (limit from --gate.min_pair_gbps on the command line)");
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
      gate("max_ckpt_stall_fraction", tp::Direction::at_most, 0.1, "train", "s"),
      gate("min_goodput", tp::Direction::at_least, 0.5, "train", "g"),
      gate("min_restore_gbps", tp::Direction::at_least, 1, "restore", "r"),
      gate("max_restore_s", tp::Direction::at_most, 60, "restore", "t"),
  });
  const json report = {{"checkpoint", {{"write_gbps", 2.5}, {"stall_fraction", 0.02}}},
                       {"job", {{"goodput", 0.75}}},
                       {"restore", {{"gbps", 3.5}, {"seconds", 12.0}}}};
  const json checks = tp::judge_thresholds(c, report, {{"train", 1}, {"restore", 1}});
  ASSERT_EQ(checks.size(), 5u);
  EXPECT_EQ(checks[0]["value"], 2.5);
  EXPECT_EQ(checks[1]["value"], 0.02);
  EXPECT_EQ(checks[2]["value"], 0.75);
  EXPECT_EQ(checks[3]["value"], 3.5);
  EXPECT_EQ(checks[4]["value"], 12.0);
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

json baseline_report(double samples_per_s, double step_p50, const std::string& hash) {
  return {{"schema", "trainproof.report/2"},
          {"context", {{"scenario_hash", hash}}},
          {"train",
           {{"samples_per_s", samples_per_s},
            {"au", 0.8},
            {"phases", {{"step", {{"p50", step_p50}}}}}}}};
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
                "baseline_checkpoint_stall_fraction", "baseline_data_read",
                "baseline_sweep_avg_busbw", "baseline_sweep_avg_busbw_1_MiB"}));
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
  EXPECT_EQ(report["schema"], "trainproof.report/2");
  // The second attempt's section replaces the first's whole.
  EXPECT_EQ(report["train"], (json{{"au", 0.9}}));
  EXPECT_EQ(report["preflight"], (json{{"folders", json::array()}}));
  EXPECT_EQ(report["job"]["wall_s"], 100.0);

  const json& history = report["accept"]["attempts"];
  ASSERT_EQ(history.size(), 3u);
  EXPECT_EQ(history[0], (json{{"stage", "preflight"},
                              {"attempt", 1},
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
  tp::add_sections(report,
                   {{"sweep", {{"mode", "pairwise"}, {"pairwise", {{"rails", json::array()}}}}},
                    {"nodes", {"n0"}}});
  EXPECT_EQ(
      report,
      (json{{"sweep",
             {{"mode", "pairwise"}, {"results", {1, 2}}, {"pairwise", {{"rails", json::array()}}}}},
            {"nodes", {"n0"}}}));
  // Any other section is replaced whole.
  tp::add_sections(report, {{"nodes", {"n1"}}});
  EXPECT_EQ(report["nodes"], (json{"n1"}));
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
  EXPECT_EQ(named(checks, "min_busbw_gbps.allreduce")["value"], 50.0);
  EXPECT_EQ(named(checks, "min_pair_gbps")["value"], 11.0);
  EXPECT_EQ(named(checks, "min_pair_gbps")["status"], "pass") << "11 clears 10 by over 5%";
  EXPECT_THAT(named(checks, "min_pair_gbps")["reason"].get<std::string>(),
              StartsWith("nodes b to a: "));
}

// The preflight's folder probe and the restore's digest check

tp::FolderProbe worked() {
  return {"", 0.01};
}
tp::FolderProbe broken(const std::string& why) {
  return {why, 0};
}

TEST(AcceptPreflight, FolderProbeNamesTheFirstFailingRankHostAndFolder) {
  const std::vector<std::string> roles = {"checkpoint.dir /ck", "data.dir /data"};
  const std::vector<std::string> hosts = {"n0", "n0", "n1"};
  const json failed = tp::folder_probe_check(
      roles,
      {{worked(), worked()},
       {worked(), broken("cannot open the dataset's index '/data/index.json'")},
       {broken("cannot create '/ck'"), worked()}},
      hosts);
  EXPECT_EQ(failed["name"], "folder_probe");
  EXPECT_EQ(failed["status"], "fail");
  EXPECT_EQ(failed["value"], 2);
  EXPECT_EQ(failed["threshold"], 0);
  EXPECT_EQ(failed["reason"],
            "2 probe(s) failed; first: rank 1 (n0), data.dir /data: cannot open the dataset's "
            "index '/data/index.json'");

  const json passed =
      tp::folder_probe_check(roles, {{worked(), worked()}, {worked(), worked()}}, {"n0", "n1"});
  EXPECT_EQ(passed["status"], "pass");
  EXPECT_EQ(passed["value"], 0);
  EXPECT_THAT(passed["reason"].get<std::string>(), StartsWith("every rank wrote"));

  const json none = tp::folder_probe_check({}, {{}, {}}, {"n0", "n1"});
  EXPECT_EQ(none["status"], "n/a");
  EXPECT_EQ(none["value"], nullptr);
  EXPECT_EQ(none["reason"], "no checkpoint.dir or data.dir to probe");
}

// A folder of its own under the test's temporary directory, removed at the end.
class AcceptProbe : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            ("accept_probe_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(AcceptProbe, CheckpointFolderIsCreatedWrittenAndLeftEmpty) {
  const fs::path dir = root_ / "ckpt" / "nested";
  const tp::FolderProbe probe = tp::probe_checkpoint_folder(dir.string(), 3);
  EXPECT_EQ(probe.problem, "");
  EXPECT_GE(probe.seconds, 0.0);
  ASSERT_TRUE(fs::is_directory(dir));
  EXPECT_TRUE(fs::is_empty(dir)) << "the probe file is deleted";
}

TEST_F(AcceptProbe, CheckpointFolderUnderARegularFileFails) {
  const fs::path file = root_ / "not_a_folder";
  std::ofstream(file) << "x";
  const std::string dir = (file / "ckpt").string();
  const tp::FolderProbe probe = tp::probe_checkpoint_folder(dir, 0);
  EXPECT_THAT(probe.problem, StartsWith("cannot create '" + dir + "': "));
  EXPECT_GT(probe.problem.size(), ("cannot create '" + dir + "': ").size()) << "and says why";
  EXPECT_EQ(probe.seconds, 0.0);
}

TEST_F(AcceptProbe, DataFolderNeedsANonEmptyIndex) {
  const std::string dir = root_.string();
  const std::string index = dir + "/index.json";
  EXPECT_EQ(tp::probe_data_folder(dir).problem,
            "cannot open the dataset's index '" + index + "': No such file or directory");
  std::ofstream(index).close();
  EXPECT_EQ(tp::probe_data_folder(dir).problem, "the dataset's index '" + index + "' is empty");
  std::ofstream(index) << "{}";
  const tp::FolderProbe probe = tp::probe_data_folder(dir);
  EXPECT_EQ(probe.problem, "");
  EXPECT_GE(probe.seconds, 0.0);
}

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
