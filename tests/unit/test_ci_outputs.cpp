// What CI and monitoring ingest (docs/report.md, "Outputs for CI and monitoring"): JUnit XML with
// a suite per stage, Prometheus text with bounded labels, and --strict's exit code.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "app/cli/cli.h"
#include "app/cli/output_options.h"
#include "app/report/gate.h"
#include "app/report/junit.h"
#include "app/report/outputs.h"
#include "app/report/prometheus.h"
#include "common/errors.h"

namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

json accept_report() {
  return {
      {"verdict", "FAIL"},
      {"accept", {{"stages", {"preflight", "pairwise", "train"}}}},
      {"context", {{"run_id", "r1"}, {"scenario_hash", "abc"}}},
      {"train",
       {{"phases",
         {{"step", {{"min", 0.01}, {"p50", 0.02}, {"p99", 0.03}, {"max", 0.04}}},
          {"compute", {{"min", 0.005}, {"p50", 0.01}, {"p99", 0.02}, {"max", 0.02}}}}}}},
      {"sweep",
       {{"results",
         {{{"op", "allreduce"},
           {"group", "world"},
           {"bytes", 1048576},
           {"in_place", true},
           {"busbw_gbps", 5.5}},
          {{"op", "allreduce"}, {"group", "node a"}, {"bytes", 1048576}, {"busbw_gbps", 9.0}}}}}},
      {"checkpoint", {{"write_gbps", 0.2}}},
      {"job", {{"goodput", 0.03}, {"train_goodput", 0.08}}},
      {"nodes",
       {{{"host", "gpu-01"}, {"flagged", false}},
        {{"host", "gpu-\"02\""}, {"flagged", true}, {"reasons", {"slow"}}}}},
      {"gate",
       {{"checks",
         {{{"name", "topology"},
           {"stage", "preflight"},
           {"status", "pass"},
           {"value", 0},
           {"threshold", 0},
           {"reason", "no node differs"}},
          {{"name", "pairwise_flags"},
           {"stage", "pairwise"},
           {"status", "fail"},
           {"value", 1},
           {"threshold", 0},
           {"reason", "gpu-02: send <at> 3% & worse"}},
          {{"name", "flagged_nodes"},
           {"stage", "train"},
           {"status", "warn"},
           {"value", 1},
           {"threshold", 0},
           {"reason", "flagged: gpu-02"}},
          {{"name", "min_au"},
           {"status", "n/a"},
           {"value", nullptr},
           {"threshold", 0.5},
           {"source", "gate.min_au in gate.file h.ini"},
           {"reason", "stage train did not run"}}}},
        {"thresholds", {{{"check", "min_au"}, {"stage", "train"}}}}}}};
}

TEST(StageOfCheck, OwnStageThenTheThresholdsThenTheReportsKind) {
  const json report = accept_report();
  EXPECT_EQ(tp::stage_of_check(report["gate"]["checks"][1], report), "pairwise");
  EXPECT_EQ(tp::stage_of_check(report["gate"]["checks"][3], report), "train");
  EXPECT_EQ(tp::stage_of_check({{"name", "drill"}}, report), "drill");
  EXPECT_EQ(tp::stage_of_check({{"name", "straggler_score"}}, json{{"train", json::object()}}),
            "train");
}

TEST(Junit, OneSuitePerStageAFailureForFailAndSkippedForNotApplicable) {
  const std::string xml = tp::render_junit(accept_report());
  EXPECT_THAT(xml, HasSubstr("<testsuites name=\"trainproof accept\" tests=\"4\" failures=\"1\" "
                             "errors=\"0\" skipped=\"1\">"));
  EXPECT_THAT(xml, HasSubstr("<testsuite name=\"pairwise\" tests=\"1\" failures=\"1\""));
  EXPECT_THAT(xml, HasSubstr("<testsuite name=\"train\" tests=\"2\" failures=\"0\" errors=\"0\" "
                             "skipped=\"1\">"));
  EXPECT_THAT(xml, HasSubstr("<failure type=\"FAIL\" message=\"gpu-02: send &lt;at&gt; 3% &amp; "
                             "worse\">"));
  EXPECT_THAT(xml, HasSubstr("<skipped message=\"stage train did not run\"/>"));
  EXPECT_THAT(xml, HasSubstr("status: warn\nvalue: 1\nthreshold: 0\nreason: flagged: gpu-02"));
  EXPECT_THAT(xml, HasSubstr("source: gate.min_au in gate.file h.ini"));
  EXPECT_THAT(xml, HasSubstr("<property name=\"run_id\" value=\"r1\"/>"));
}

TEST(Junit, ControlCharactersNeverReachTheXml) {
  json report = accept_report();
  report["gate"]["checks"][0]["reason"] = std::string(
      "a\x01"
      "b\x1b[31m");
  EXPECT_THAT(tp::render_junit(report), HasSubstr("a?b?[31m"));
}

TEST(Prometheus, StateSetsValuesAndFiguresInBaseUnits) {
  const std::string text = tp::render_prometheus(accept_report());
  EXPECT_THAT(text, HasSubstr("# TYPE trainproof_verdict gauge\n"));
  EXPECT_THAT(text, HasSubstr("trainproof_verdict{verdict=\"FAIL\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("trainproof_verdict{verdict=\"PASS\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("trainproof_run_info{kind=\"accept\",run_id=\"r1\",scenario_hash="
                              "\"abc\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("trainproof_check_status{check=\"pairwise_flags\",stage=\"pairwise\""
                              ",status=\"fail\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("trainproof_check_status{check=\"min_au\",stage=\"train\",status="
                              "\"na\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("trainproof_check_threshold{check=\"min_au\",stage=\"train\"} 0.5\n"));
  EXPECT_THAT(text, Not(HasSubstr("trainproof_check_value{check=\"min_au\"")));  // null: none
  EXPECT_THAT(text, HasSubstr("trainproof_step_phase_seconds{phase=\"step\",stat=\"p50\"} 0.02\n"));
  EXPECT_THAT(text, Not(HasSubstr("quantile=")));  // promtool: a label of summaries only
  EXPECT_THAT(text, HasSubstr("trainproof_sweep_busbw_bytes_per_second{op=\"allreduce\","
                              "message_bytes=\"1048576\",in_place=\"true\"} 5.5e+09\n"));
  EXPECT_THAT(text, Not(HasSubstr("9e+09")));  // a node group's row is not the job's
  EXPECT_THAT(text, HasSubstr("trainproof_checkpoint_write_bytes_per_second 2e+08\n"));
  EXPECT_THAT(text, HasSubstr("trainproof_goodput_ratio{scope=\"train\"} 0.08\n"));
  EXPECT_THAT(text, HasSubstr("trainproof_node_flagged{host=\"gpu-\\\"02\\\"\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("rank=")));
}

TEST(Prometheus, LabelValuesAreEscaped) {
  EXPECT_EQ(tp::prometheus_label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
}

TEST(Strict, AWarnExitsOneAndTheVerdictStays) {
  tp::SideOutputs outputs;
  EXPECT_EQ(tp::exit_code_under("WARN", outputs), 0);
  outputs.strict = true;
  EXPECT_EQ(tp::exit_code_under("WARN", outputs), 1);
  EXPECT_EQ(tp::exit_code_under("PASS", outputs), 0);
  EXPECT_EQ(tp::exit_code_under("NONE", outputs), 0);
  EXPECT_EQ(tp::exit_code_under("FAIL", outputs), 1);
  json report = {{"context", json::object()}, {"verdict", "WARN"}};
  tp::record_strict(report, outputs);
  EXPECT_EQ(report["context"]["strict"], true);
  EXPECT_EQ(report["verdict"], "WARN");
}

tp::SideOutputs outputs_of(std::vector<std::string> args) {
  args.insert(args.begin(), {"trainproof", "train"});
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return tp::side_outputs_from(tp::parse_invocation(int(argv.size()), argv.data()).options, true);
}

TEST(SideOutputs, FilesAreCheckedBeforeAnythingRuns) {
  const std::string dir = ::testing::TempDir();
  const tp::SideOutputs given =
      outputs_of({"--junit", dir + "j.xml", "--metrics", dir + "m.prom", "--strict"});
  EXPECT_EQ(given.junit, dir + "j.xml");
  EXPECT_TRUE(given.strict);
  EXPECT_FALSE(outputs_of({}).strict);
  try {
    outputs_of({"--junit=/nonexistent/folder/j.xml"});
    FAIL() << "an unwritable --junit was accepted";
  } catch (const tp::UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--junit"));
  }
  EXPECT_THROW(outputs_of({"--metrics", dir + "r.json", "--report", dir + "r.json"}),
               tp::UsageError);
  EXPECT_THROW(outputs_of({"--metrics", dir + "x", "--junit", dir + "x"}), tp::UsageError);
}

}  // namespace
