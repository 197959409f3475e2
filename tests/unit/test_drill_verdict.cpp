#include <gtest/gtest.h>

#include "app/drill/drill_verdict.h"

namespace {

tp::DrillFailure recovered(const char* kind, int64_t rpo_steps, std::optional<double> rto_s) {
  tp::DrillFailure failure;
  failure.kind = kind;
  failure.detected = true;
  tp::DrillRecovery recovery;
  recovery.recorded = true;
  recovery.rpo_steps = rpo_steps;
  recovery.rto_s = rto_s;
  failure.recovery = recovery;
  return failure;
}

tp::DrillResult matching(std::vector<tp::DrillFailure> failures) {
  tp::DrillResult result;
  result.reference_digest = "aaaa";
  result.final_digest = "aaaa";
  result.failures = std::move(failures);
  return result;
}

TEST(DrillVerdict, PassesWithTheWorstRpoAndRtoAndTheSumOfRedoneWork) {
  tp::DrillResult result =
      matching({recovered("kill", 1, 3.0), recovered("kill", 4, 5.5), recovered("hang", 2, 4.0)});
  tp::decide_verdict(result, 0.5);
  EXPECT_EQ(result.verdict, "PASS");
  EXPECT_TRUE(result.digest_match);
  EXPECT_TRUE(result.problems.empty());
  EXPECT_EQ(result.rpo_steps, 4);  // the worst, not the first or the least
  EXPECT_EQ(result.rpo_s, 2.0);
  EXPECT_EQ(result.rto_s, 5.5);
  EXPECT_DOUBLE_EQ(result.redone_step_seconds, 3.5);  // (1 + 4 + 2) steps at 0.5 s
}

TEST(DrillVerdict, WithoutFailuresThereIsNoRpoOrRto) {
  tp::DrillResult result = matching({});
  tp::decide_verdict(result, 0.5);
  EXPECT_EQ(result.verdict, "PASS");
  EXPECT_FALSE(result.rpo_steps.has_value());
  EXPECT_FALSE(result.rpo_s.has_value());
  EXPECT_FALSE(result.rto_s.has_value());
  EXPECT_EQ(result.redone_step_seconds, 0.0);
}

TEST(DrillVerdict, AFailureNoRelaunchFollowedCountsNoRpoAndNoRto) {
  tp::DrillFailure gave_up;
  gave_up.kind = "kill";
  gave_up.detected = true;
  tp::DrillResult result = matching({recovered("kill", 2, std::nullopt), gave_up});
  tp::decide_verdict(result, 1.0);
  EXPECT_EQ(result.rpo_steps, 2);
  EXPECT_FALSE(result.rto_s.has_value());
  EXPECT_EQ(result.redone_step_seconds, 2.0);
}

TEST(DrillVerdict, ADifferentFinalDigestFails) {
  tp::DrillResult result = matching({recovered("kill", 1, 3.0)});
  result.final_digest = "bbbb";
  tp::decide_verdict(result, 0.5);
  EXPECT_EQ(result.verdict, "FAIL");
  EXPECT_FALSE(result.digest_match);
  EXPECT_EQ(result.problems,
            std::vector<std::string>{"final digest bbbb differs from the reference aaaa"});
}

TEST(DrillVerdict, NoFinishedRunFailsEvenWithoutAReference) {
  tp::DrillResult result;
  tp::decide_verdict(result, 0.5);
  EXPECT_EQ(result.verdict, "FAIL");
  EXPECT_FALSE(result.digest_match);
  EXPECT_EQ(result.problems, std::vector<std::string>{"the drill never finished a run"});
}

TEST(DrillVerdict, AnUndetectedFailureFailsAfterTheProblemsFoundOnTheWay) {
  tp::DrillFailure hang = recovered("hang", 1, 9.0);
  hang.detected = false;
  tp::DrillResult result = matching({recovered("kill", 1, 3.0), hang});
  result.problems = {"found while running"};
  tp::decide_verdict(result, 0.5);
  EXPECT_EQ(result.verdict, "FAIL");
  EXPECT_TRUE(result.digest_match);
  EXPECT_EQ(result.problems,
            (std::vector<std::string>{"found while running", "hang was not detected"}));
}

TEST(DrillVerdict, AProblemFoundOnTheWayAloneFails) {
  tp::DrillResult result = matching({});
  result.problems = {"gave up after drill.max_restarts=0 relaunches"};
  tp::decide_verdict(result, 0.5);
  EXPECT_EQ(result.verdict, "FAIL");
}

TEST(DrillVerdict, TheReportVerdictIsTheDrillsFailOrElseTheFinalRunsOwn) {
  tp::DrillResult result = matching({});
  tp::decide_verdict(result, 0.5);
  const nlohmann::json warned{{"verdict", "WARN"}};
  EXPECT_EQ(tp::combined_verdict(result, warned), "WARN");
  EXPECT_EQ(tp::combined_verdict(result, nullptr), "PASS");
  EXPECT_EQ(tp::combined_verdict(result, nlohmann::json::object()), "PASS");
  result.problems = {"something"};
  EXPECT_EQ(tp::combined_verdict(result, warned), "FAIL");
}

TEST(DrillVerdict, DigestAndStepTimeAreReadFromARunsReport) {
  const nlohmann::json report = nlohmann::json::parse(
      R"({"train": {"final_digest": "b27e", "phases": {"step": {"p50": 0.25}}}})");
  EXPECT_EQ(tp::final_digest_of(report), "b27e");
  EXPECT_EQ(tp::median_step_seconds(report), 0.25);
  EXPECT_EQ(tp::final_digest_of(nullptr), "");
  EXPECT_EQ(tp::final_digest_of(nlohmann::json::object()), "");
  EXPECT_EQ(tp::median_step_seconds(nullptr), 0.0);
  EXPECT_EQ(tp::median_step_seconds(nlohmann::json::parse(R"({"train": {}})")), 0.0);
}

}  // namespace
