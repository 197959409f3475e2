// What CI and monitoring ingest (docs/report.md, "Outputs for CI and monitoring"): JUnit XML with
// a suite per stage, Prometheus text with bounded labels, and --strict's exit code.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "app/cli/cli.h"
#include "app/cli/output_options.h"
#include "app/report/gate.h"
#include "app/report/junit.h"
#include "app/report/outputs.h"
#include "app/report/prometheus.h"
#include "common/errors.h"

namespace {

using nlohmann::json;
using ::testing::AllOf;
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
                             "errors=\"0\" skipped=\"1\" time="));
  EXPECT_THAT(xml, HasSubstr("<testsuite name=\"pairwise\" tests=\"1\" failures=\"1\""));
  EXPECT_THAT(xml, HasSubstr("<testsuite name=\"train\" tests=\"2\" failures=\"0\" errors=\"0\" "
                             "skipped=\"1\" time="));
  EXPECT_THAT(xml, HasSubstr("<failure type=\"FAIL\" message=\"gpu-02: send &lt;at&gt; 3% &amp; "
                             "worse\">"));
  EXPECT_THAT(xml, HasSubstr("<skipped message=\"stage train did not run\"/>"));
  EXPECT_THAT(xml, HasSubstr("status: warn\nvalue: 1\nthreshold: 0\nreason: flagged: gpu-02"));
  EXPECT_THAT(xml, HasSubstr("source: gate.min_au in gate.file h.ini"));
  EXPECT_THAT(xml, HasSubstr("<property name=\"run_id\" value=\"r1\"/>"));
}

TEST(Junit, AWarnPassesButSaysSoAndEverySuiteAndCaseHasItsTime) {
  json report = accept_report();
  report["context"]["start_time"] = "2026-12-03T10:15:00.250Z";
  report["context"]["end_time"] = "2026-12-03T10:17:30.750Z";
  report["job"]["categories"] = {{{"name", "pairwise"}, {"seconds", 42.5}}};
  report["job"]["train_wall_s"] = 61.25;
  const std::string xml = tp::render_junit(report);
  const std::string warn = xml.substr(xml.find("name=\"flagged_nodes\""));
  EXPECT_THAT(warn.substr(0, warn.find("</testcase>")),
              AllOf(HasSubstr("<property name=\"status\" value=\"WARN\"/>"),
                    HasSubstr("<system-err>WARN: flagged: gpu-02</system-err>"),
                    Not(HasSubstr("<skipped")), Not(HasSubstr("<failure"))));
  EXPECT_THAT(xml, HasSubstr("<property name=\"status\" value=\"PASS\"/>"));
  EXPECT_THAT(xml, HasSubstr("time=\"150.500\" timestamp=\"2026-12-03T10:15:00\">"));
  EXPECT_THAT(xml, HasSubstr("<testsuite name=\"pairwise\" tests=\"1\" failures=\"1\" errors=\"0\" "
                             "skipped=\"0\" time=\"42.500\" timestamp=\"2026-12-03T10:15:00\">"));
  EXPECT_THAT(xml, HasSubstr("skipped=\"1\" time=\"61.250\" timestamp="));  // train
  EXPECT_THAT(xml, HasSubstr("skipped=\"0\" time=\"0.000\" timestamp="));   // preflight
  // Every case has a time; only WARN cases a <system-err>.
  size_t cases = 0, timed = 0;
  for (size_t at = xml.find("<testcase "); at != std::string::npos;
       at = xml.find("<testcase ", at + 1)) {
    ++cases;
    timed += xml.substr(at, xml.find('>', at) - at).find(" time=\"0.000\"") != std::string::npos;
  }
  EXPECT_EQ(cases, 4u);
  EXPECT_EQ(timed, cases);
  size_t errs = 0;
  for (size_t at = xml.find("<system-err>"); at != std::string::npos;
       at = xml.find("<system-err>", at + 1))
    ++errs;
  EXPECT_EQ(errs, 1u);
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

json drill_and_pairwise_report() {
  json report = accept_report();
  report["drill"] = {{"rto_s", 12.5},
                     {"rpo_steps", 3},
                     {"rpo_s", 0.75},
                     {"failures",
                      {{{"kind", "kill"}, {"detected", true}, {"detected_after_s", 1.5}},
                       {{"kind", "hang"}, {"detected", false}, {"detected_after_s", 0}}}}};
  report["sweep"]["pairwise"] = {
      {"rails",
       {{{"rail", 0},
         {"hosts", {"n1", "n2", "n\"3"}},
         {"one_way_gbps", {{nullptr, 2.0, 4.0}, {1.0, nullptr, 3.0}, {0.036, 0.03, nullptr}}},
         {"both_ways_gbps", {{nullptr, 1.0, 1.0}, {1.0, nullptr, 1.0}, {1.0, 1.0, nullptr}}}}}}};
  return report;
}

TEST(Prometheus, TheDrillsRecoveryAndEachNodesPairwiseBandwidth) {
  const std::string text = tp::render_prometheus(drill_and_pairwise_report());
  EXPECT_THAT(text, HasSubstr("# TYPE trainproof_drill_rto_seconds gauge\n"
                              "trainproof_drill_rto_seconds 12.5\n"));
  EXPECT_THAT(text, HasSubstr("trainproof_drill_rpo_steps 3\n"));
  EXPECT_THAT(text, HasSubstr("trainproof_drill_rpo_seconds 0.75\n"));
  EXPECT_THAT(text,
              HasSubstr("trainproof_drill_detection_seconds{failure=\"0\",kind=\"kill\"} 1.5\n"));
  EXPECT_THAT(text, Not(HasSubstr("kind=\"hang\"")));  // never detected: no detection time
  // n1 sent at 2 and 4 GB/s (median 3), received 1 and 0.036 (median 0.518).
  EXPECT_THAT(text, HasSubstr("trainproof_pairwise_node_bytes_per_second{host=\"n1\",rail=\"0\","
                              "direction=\"send\",mode=\"one_way\"} 3e+09\n"));
  EXPECT_THAT(text, HasSubstr("trainproof_pairwise_node_bytes_per_second{host=\"n1\",rail=\"0\","
                              "direction=\"receive\",mode=\"one_way\"} 5.18e+08\n"));
  EXPECT_THAT(text, HasSubstr("{host=\"n\\\"3\",rail=\"0\",direction=\"send\",mode=\"one_way\"} "
                              "3.3e+07\n"));
  EXPECT_THAT(text, HasSubstr("direction=\"send\",mode=\"both_ways\"} 1e+09\n"));
}

// promtool, Prometheus' own checker, reads every family (the prometheus package; scripts/setup.sh
// installs it).
TEST(Prometheus, PromtoolAcceptsTheExposition) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "promtool is not installed (Debian's prometheus package)";
  const std::string path = std::filesystem::temp_directory_path() /
                           ("trainproof-metrics-" + std::to_string(::getpid()) + ".prom");
  {
    std::ofstream out(path);
    out << tp::render_prometheus(drill_and_pairwise_report());
  }
  const std::string command = "promtool check metrics < '" + path + "' 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string said;
  char buffer[512];
  while (fgets(buffer, sizeof buffer, pipe)) said += buffer;
  const int status = pclose(pipe);
  std::filesystem::remove(path);
  EXPECT_EQ(status, 0) << said;
  EXPECT_EQ(said, "") << "promtool's lint found something";
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
