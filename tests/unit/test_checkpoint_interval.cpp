#include <gtest/gtest.h>

#include "app/job/checkpoint_interval.h"

namespace {

// Worked example: a 20 s stall, one failure every 5 hours across the job (18000 s), 2 s steps.
// Young, with the overhead C/(T+C): sqrt(2 x 20 x 18000) - 20 = 848.53 - 20 = 828.53 s
// = 414.26 steps -> 414 steps, 828 s. Lost: 20/(828 + 20) + (414 + 0)/18000 = 0.023585 + 0.023.
TEST(CheckpointInterval, YoungsIntervalOnAWorkedExample) {
  const tp::IntervalChoice c = tp::optimal_checkpoint_interval({20.0, 0.0, 18000.0, 2.0});
  EXPECT_EQ(c.steps, 414);
  EXPECT_DOUBLE_EQ(c.seconds, 828.0);
  EXPECT_NEAR(c.lost_fraction, 20.0 / 848.0 + 414.0 / 18000.0, 1e-12);
  // It is the minimum: a shorter or longer interval loses more.
  const tp::IntervalInputs in{20.0, 0.0, 18000.0, 2.0};
  EXPECT_LT(c.lost_fraction, tp::lost_fraction_at(in, 400.0));
  EXPECT_LT(c.lost_fraction, tp::lost_fraction_at(in, 1600.0));
}

// Async: the stall is small, but a checkpoint is durable only 300 s after it starts. The redone
// work grows by that, and the interval never drops below it.
TEST(CheckpointInterval, AnAsyncCheckpointIsNeverTakenBeforeTheLastOneIsDurable) {
  const tp::IntervalChoice c = tp::optimal_checkpoint_interval({0.5, 300.0, 18000.0, 2.0});
  // sqrt(2 x 0.5 x 18000) - 0.5 = 133.7 s < 300 s: the interval is the time to durable.
  EXPECT_EQ(c.steps, 150);
  EXPECT_NEAR(c.lost_fraction, 0.5 / 300.5 + (150.0 + 300.0) / 18000.0, 1e-12);
}

TEST(CheckpointInterval, NoFailuresOrAFreeCheckpointGiveNoInterval) {
  EXPECT_EQ(tp::optimal_checkpoint_interval({20.0, 0.0, 0.0, 2.0}).steps, 0);
  EXPECT_EQ(tp::optimal_checkpoint_interval({0.0, 0.0, 18000.0, 2.0}).steps, 0);
  EXPECT_EQ(tp::optimal_checkpoint_interval({0.001, 0.0, 1.0, 100.0}).steps, 1) << "at least one";
}

}  // namespace
