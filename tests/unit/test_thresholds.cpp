#include <gtest/gtest.h>

#include "app/judge/thresholds.h"
#include "app/report/gate.h"

namespace {

tp::Threshold at_least(double limit) {
  return {"min_busbw_gbps", tp::Direction::at_least, limit, "scenarios/hosts/h200.ini"};
}
tp::Threshold at_most(double limit) {
  return {"max_restore_s", tp::Direction::at_most, limit, "--gate.max_restore_s"};
}
tp::Measurement measured(double value) {
  tp::Measurement m;
  m.value = value;
  m.unit = "GB/s";
  return m;
}
std::string status(const tp::Threshold& t, double value, double margin = 0.05) {
  return tp::judge_threshold(t, measured(value), margin)["status"];
}

TEST(Thresholds, AtLeastFailsBelowWarnsInsideTheBandPassesAbove) {
  EXPECT_EQ(status(at_least(100), 99.9), "fail");
  EXPECT_EQ(status(at_least(100), 100), "warn") << "on the limit: it passes, by nothing";
  EXPECT_EQ(status(at_least(100), 104.9), "warn");
  EXPECT_EQ(status(at_least(100), 105), "pass") << "the band's edge passes";
  EXPECT_EQ(status(at_least(100), 500), "pass");
}

TEST(Thresholds, AtMostFailsAboveWarnsInsideTheBandPassesBelow) {
  EXPECT_EQ(status(at_most(60), 60.1), "fail");
  EXPECT_EQ(status(at_most(60), 60), "warn");
  EXPECT_EQ(status(at_most(60), 57.1), "warn");
  EXPECT_EQ(status(at_most(60), 57), "pass");
  EXPECT_EQ(status(at_most(60), 0), "pass");
}

TEST(Thresholds, AZeroLimitHasNoBand) {
  EXPECT_EQ(status(at_most(0), 0), "pass");
  EXPECT_EQ(status(at_most(0), 1), "fail");
  EXPECT_EQ(status(at_least(100), 100, 0.0), "pass") << "no band: the limit itself passes";
}

TEST(Thresholds, APassOnlyOnARetryWarnsAndSaysSo) {
  tp::Measurement m = measured(200);
  m.passed_on_retry = true;
  const nlohmann::json check = tp::judge_threshold(at_least(100), m, 0.05);
  EXPECT_EQ(check["status"], "warn");
  EXPECT_NE(check["reason"].get<std::string>().find("only on a retry"), std::string::npos);
  m.value = 50;
  EXPECT_EQ(tp::judge_threshold(at_least(100), m, 0.05)["status"], "fail");
}

TEST(Thresholds, TheReasonNamesWhereWhatTheLimitAndItsSource) {
  tp::Measurement m = measured(0.0036);
  m.where = "node vc-n3";
  m.detail = "pair bandwidth 3.6 MB/s is 4% of the median 95 MB/s";
  const nlohmann::json check = tp::judge_threshold(at_least(0.05), m, 0.05);
  EXPECT_EQ(check["status"], "fail");
  EXPECT_EQ(check["reason"],
            "node vc-n3: pair bandwidth 3.6 MB/s is 4% of the median 95 MB/s; 0.0036 GB/s is "
            "below 0.05 GB/s (limit from scenarios/hosts/h200.ini)");
  EXPECT_EQ(check["source"], "scenarios/hosts/h200.ini");
  EXPECT_EQ(check["direction"], "at_least");
  EXPECT_EQ(check["value"], 0.0036);
  EXPECT_EQ(check["threshold"], 0.05);
}

// A skipped stage's checks are N/A, shown as such, and weigh nothing in the verdict.
TEST(Thresholds, NothingMeasuredIsNotApplicableNeverASilentPass) {
  tp::Measurement m;
  m.skipped_stage = "sweep";
  const nlohmann::json check = tp::judge_threshold(at_least(100), m, 0.05);
  EXPECT_EQ(check["status"], "n/a");
  EXPECT_EQ(check["reason"], "not measured: stage sweep did not run");
  EXPECT_TRUE(check["value"].is_null());
  EXPECT_EQ(tp::verdict_of_checks(nlohmann::json::array({check})), "NONE") << "nothing judged";
  const nlohmann::json passing = tp::judge_threshold(at_least(100), measured(200), 0.05);
  EXPECT_EQ(tp::verdict_of_checks(nlohmann::json::array({check, passing})), "PASS");
  const nlohmann::json failing = tp::judge_threshold(at_least(100), measured(1), 0.05);
  EXPECT_EQ(tp::verdict_of_checks(nlohmann::json::array({check, failing})), "FAIL");
}

}  // namespace
