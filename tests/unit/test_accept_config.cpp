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
#include "app/judge/gate_judge.h"
#include "app/report/gate.h"
#include "common/errors.h"

namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;
namespace po = boost::program_options;
namespace fs = std::filesystem;

using Sources = std::map<std::string, std::string>;

// accept_config_from

po::variables_map parse_accept_options(const std::vector<std::string>& args) {
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
  const po::variables_map vm = parse_accept_options(args);
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

TEST(AcceptConfig, EachStageMayHaveADeadlineOfItsOwn) {
  const tp::AcceptConfig c =
      accept({"--accept.stages=sweep,pairwise", "--accept.stage_time_s=pairwise=1800,sweep=0.5"});
  EXPECT_EQ(c.stage_time_s, (std::map<std::string, double>{{"pairwise", 1800}, {"sweep", 0.5}}));
  EXPECT_TRUE(accept({"--accept.stages=sweep"}).stage_time_s.empty());
  EXPECT_EQ(refusal({"--accept.stages=sweep", "--accept.stage_time_s=sweep"}),
            "accept.stage_time_s: 'sweep': expected STAGE=SECONDS, e.g. pairwise=1800");
  EXPECT_EQ(refusal({"--accept.stages=sweep", "--accept.stage_time_s=swep=5"}),
            "accept.stage_time_s: 'swep=5': unknown stage (known: preflight, sweep, pairwise, "
            "train, restore)");
  EXPECT_EQ(refusal({"--accept.stages=sweep", "--accept.stage_time_s=pairwise=5"}),
            "accept.stage_time_s: 'pairwise=5': stage pairwise is not in accept.stages");
  for (const char* bad :
       {"sweep=0",           "sweep=-1",     "sweep=",      "sweep=5s",        "sweep=nan",
        "sweep=1e8",         "sweep=inf",    "sweep=-inf",  "sweep= 5",        "sweep=0x10",
        "sweep=1e-320",      "sweep=0.0001", "sweep=5\n",   "sweep=$(reboot)", "sweep=`id`",
        "sweep=1e",          "sweep=+5",     "sweep=1e999", "sweep=5.5.5",     "sweep==5",
        "sweep=\xef\xbc\x95"})
    EXPECT_EQ(refusal({"--accept.stages=sweep", std::string("--accept.stage_time_s=") + bad}),
              std::string("accept.stage_time_s: '") + bad +
                  "': seconds must be a decimal number from 0.001 to 1e7")
        << bad;
  EXPECT_EQ(accept({"--accept.stages=sweep", "--accept.stage_time_s=sweep=1e7"}).stage_time_s,
            (std::map<std::string, double>{{"sweep", 1e7}}));
  EXPECT_EQ(accept({"--accept.stages=sweep", "--accept.stage_time_s=sweep=.5"}).stage_time_s,
            (std::map<std::string, double>{{"sweep", 0.5}}));
  EXPECT_EQ(refusal({"--accept.stages=sweep", "--accept.stage_time_s=sweep=1,sweep=2"}),
            "accept.stage_time_s: 'sweep=2': stage sweep is given twice");
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
  EXPECT_TRUE(t.advisory) << "nobody set it";
  const tp::AcceptConfig set = accept({"--accept.stages=train", "--gate.min_straggler_score=0.8"},
                                      {{"gate.min_straggler_score", "command line"}});
  EXPECT_FALSE(set.thresholds[0].advisory);
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
  std::ofstream(scenario)
      << "[accept]\nstages = train\n[gate]\nmin_au = 0.4\nmin_straggler_score = 0.8\n";
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
  // The host file's min_au wins over the scenario's (the host type is more specific than the
  // workload), and says so; the scenario still sets what the host file leaves alone.
  EXPECT_EQ(threshold_named(c, "min_au").threshold.limit, 0.9);
  EXPECT_EQ(threshold_named(c, "min_au").threshold.source, "gate.min_au in gate.file " + host);
  EXPECT_EQ(threshold_named(c, "max_step_cv").threshold.source,
            "gate.max_step_cv in gate.file " + host);
  EXPECT_EQ(threshold_named(c, "min_straggler_score").threshold.source,
            "gate.min_straggler_score in scenario " + scenario);
  EXPECT_EQ(threshold_named(c, "min_goodput").threshold.source,
            "--gate.min_goodput on the command line");
}

// The command line wins over the host file, and a scenario may name its host file.
TEST(AcceptConfig, TheCommandLineWinsOverTheHostFileAScenarioMayName) {
  const std::string dir = ::testing::TempDir();
  const std::string scenario = dir + "accept_scenario_naming.ini";
  const std::string host = dir + "accept_host_named.ini";
  std::ofstream(host) << "[gate]\nmin_au = 0.9\n";
  std::ofstream(scenario) << "[accept]\nstages = train\n[gate]\nfile = " << host
                          << "\nmin_au = 0.4\n";
  const char* argv[] = {"trainproof", "accept", "--scenario", scenario.c_str(),
                        "--gate.min_au=0.2"};
  const tp::Invocation inv = tp::parse_invocation(int(std::size(argv)), argv);
  const tp::AcceptConfig c =
      tp::accept_config_from(inv.options, inv.option_source, tp::train_config_from(inv.options));
  EXPECT_EQ(threshold_named(c, "min_au").threshold.limit, 0.2);
  const char* without[] = {"trainproof", "accept", "--scenario", scenario.c_str()};
  const tp::Invocation named = tp::parse_invocation(int(std::size(without)), without);
  EXPECT_EQ(named.option_source.at("gate.min_au"), "gate.file " + host);
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
                       "--gate.max_ckpt_overhead=0.1"}),
              HasSubstr("--gate.max_ckpt_overhead on the command line judges the "
                        "checkpoint overhead"));
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
            "gate.min_au must be >= 0 (0: not checked), got -1");
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

}  // namespace
