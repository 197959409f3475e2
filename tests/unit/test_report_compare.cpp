#include <gtest/gtest.h>

#include "app/judge/report_compare.h"
#include "tests/unit/golden.h"

namespace {

using nlohmann::json;

json report(double samples_per_s, double step_p50, double write_gbps, const std::string& hash) {
  return {{"schema", "trainproof.report/2"},
          {"verdict", "PASS"},
          {"context",
           {{"scenario_hash", hash},
            {"world_size", 4},
            {"backends", {{"compute", "cpu"}, {"comm", "mpi"}}}}},
          {"train",
           {{"samples_per_s", samples_per_s},
            {"tokens_per_s", samples_per_s * 128},
            {"au", 0.8},
            {"steps_completed", 30},
            {"achieved_flops", 1e12},
            {"phases",
             {{"step", {{"p50", step_p50}}},
              {"compute", {{"p50", 0.010}}},
              {"comm", {{"p50", 0.002}}}}}}},
          {"checkpoint", {{"write_gbps", write_gbps}, {"restore_gbps", 2.0}, {"overhead", 0.0}}}};
}

const json& metric(const json& comparison, const std::string& name) {
  for (const json& m : comparison["metrics"])
    if (m["name"] == name) return m;
  static const json none;
  ADD_FAILURE() << "no metric " << name;
  return none;
}

TEST(ReportCompare, EachMetricIsJudgedInItsBetterDirection) {
  // Throughput fell to 80%; the step got 25% slower (golden/new = 0.8); writes got faster.
  const json c =
      tp::compare_reports(report(100, 0.020, 1.0, "h"), report(80, 0.025, 1.5, "h"), 0.9);
  EXPECT_EQ(metric(c, "samples/s")["status"], "fail");
  EXPECT_DOUBLE_EQ(metric(c, "samples/s")["ratio"], 0.8);
  EXPECT_EQ(metric(c, "step p50")["status"], "fail");
  EXPECT_EQ(metric(c, "step p50")["better"], "lower");
  EXPECT_EQ(metric(c, "checkpoint write")["status"], "pass");
  EXPECT_EQ(metric(c, "AU")["status"], "pass");
  EXPECT_EQ(metric(c, "checkpoint overhead")["status"], "n/a") << "golden is 0";
  EXPECT_EQ(metric(c, "data read")["status"], "n/a") << "in neither report";
  EXPECT_EQ(c["verdict"], "FAIL");
  EXPECT_TRUE(c["differences"].empty());
}

// The wording moves the way the ratio column does (new / golden), then says better or worse: a
// step 2.317 times as long rose to 232% of golden, it did not "fall to 43%".
TEST(ReportCompare, TheWordingSaysWhatChangedInTheRatiosDirection) {
  const json c =
      tp::compare_reports(report(100, 0.020, 1.0, "h"), report(230, 0.020 * 2.317, 0.5, "h"), 0.9);
  EXPECT_EQ(metric(c, "step p50")["reason"],
            "rose to 232% of golden: worse (lower is better; tolerance 0.9 allows up to 111%)");
  EXPECT_EQ(metric(c, "samples/s")["reason"],
            "rose to 230% of golden: better (higher is better; tolerance 0.9 allows down to 90%)");
  EXPECT_EQ(metric(c, "checkpoint write")["reason"],
            "fell to 50% of golden: worse (higher is better; tolerance 0.9 allows down to 90%)");
  EXPECT_EQ(metric(c, "AU")["reason"],
            "the same as golden (higher is better; tolerance 0.9 allows down to 90%)");
  const std::string text = tp::render_comparison(c);
  EXPECT_NE(text.find("   2.32  lower   FAIL: rose to 232% of golden: worse"), std::string::npos)
      << text;
  EXPECT_NE(text.find("    0.5  higher  FAIL: fell to 50% of golden: worse"), std::string::npos)
      << text;
}

TEST(ReportCompare, ANewTimeOfZeroWasNotMeasuredAndIsNotAPass) {
  const json c = tp::compare_reports(report(100, 0.020, 1.0, "h"), report(100, 0.0, 1.0, "h"), 0.9);
  EXPECT_EQ(metric(c, "step p50")["status"], "n/a");
  EXPECT_EQ(metric(c, "step p50")["reason"], "new is 0: no time was measured");
  EXPECT_EQ(metric(c, "step p50")["ratio"], nullptr);
}

TEST(ReportCompare, WithinTheToleranceIsAPass) {
  const json c =
      tp::compare_reports(report(100, 0.020, 1.0, "h"), report(91, 0.0215, 0.95, "h"), 0.9);
  EXPECT_EQ(c["verdict"], "PASS") << c.dump(2);
}

TEST(ReportCompare, SaysWhenTheRunsDidDifferentWork) {
  json fresh = report(100, 0.020, 1.0, "other");
  fresh["context"]["world_size"] = 8;
  fresh["context"]["backends"]["comm"] = "nccl";
  const json c = tp::compare_reports(report(100, 0.020, 1.0, "h"), fresh, 0.9);
  ASSERT_EQ(c["differences"].size(), 3u) << c["differences"];
  EXPECT_EQ(c["differences"][0],
            "scenario hashes differ (golden h, new other): this compares different work");
  EXPECT_EQ(c["differences"][1], "world sizes differ: golden 4, new 8");
  EXPECT_EQ(c["differences"][2], "comm backends differ: golden mpi, new nccl");
}

TEST(ReportCompare, AnIncompleteRunIsComparedOnWhatBothHoldAndSaysWhatIsMissing) {
  json stopped = report(100, 0.020, 1.0, "h");
  stopped.erase("checkpoint");
  stopped["accept"] = {{"incomplete", "SIGTERM received during stage train"}};
  const json c = tp::compare_reports(report(100, 0.020, 1.0, "h"), stopped, 0.9);
  ASSERT_EQ(c["differences"].size(), 2u) << c["differences"];
  EXPECT_EQ(c["differences"][0],
            "only the golden report has a checkpoint section: its metrics are n/a");
  EXPECT_EQ(c["differences"][1],
            "the new run is INCOMPLETE (SIGTERM received during stage train): only what both "
            "hold is compared");
  EXPECT_EQ(metric(c, "checkpoint write")["status"], "n/a");
  EXPECT_EQ(metric(c, "samples/s")["status"], "pass");
}

TEST(ReportCompare, NothingInCommonIsNoVerdict) {
  EXPECT_EQ(tp::compare_reports(json::object(), json::object(), 0.9)["verdict"], "NONE");
}

// Golden output: the comparison table is a user interface. Regenerate with
// TRAINPROOF_UPDATE_GOLDEN=1.
TEST(ReportCompare, TableMatchesGolden) {
  json fresh = report(80, 0.025, 1.5, "other");
  tp::test::expect_golden(
      tp::render_comparison(tp::compare_reports(report(100, 0.020, 1.0, "h"), fresh, 0.9)),
      "report-compare.golden");
}

}  // namespace
