#include <gtest/gtest.h>

#include "common/stats.h"

TEST(Stats, PercentileInterpolatesLikeNumpy) {
  const std::vector<double> v{4, 1, 3, 2};  // sorted 1 2 3 4
  EXPECT_DOUBLE_EQ(tp::percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(tp::percentile(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(tp::percentile(v, 100), 4);
  EXPECT_NEAR(tp::percentile(v, 99), 3.97, 1e-12);
  EXPECT_DOUBLE_EQ(tp::percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(tp::percentile({}, 50), 0);
}

TEST(Stats, Summarize) {
  const auto s = tp::summarize({1, 2, 3, 4, 100});
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 100);
  EXPECT_DOUBLE_EQ(s.p50, 3);
  EXPECT_DOUBLE_EQ(s.mean, 22);
  EXPECT_EQ(s.count, 5u);
}

TEST(Stats, StragglerScoreIsMedianOverOwn) {
  const auto scores = tp::straggler_scores({10, 10, 10, 100});
  EXPECT_DOUBLE_EQ(scores[0], 1.0);
  EXPECT_DOUBLE_EQ(scores[3], 0.1);
  EXPECT_LT(scores[3], tp::kStragglerThreshold);
  // A fast rank scores above 1 and is never flagged.
  EXPECT_GT(tp::straggler_scores({5, 10, 10})[0], 1.0);
  // Nothing measured: nothing to compare.
  EXPECT_DOUBLE_EQ(tp::straggler_scores({0, 0})[0], 1.0);
}
