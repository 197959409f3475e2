#include <gtest/gtest.h>

#include "train/bucket_plan.h"

TEST(BucketPlan, PacksLayersInBackwardOrderUntilTheCap) {
  // 1 MiB layers, 2.5 MiB cap: buckets of three layers close once they reach the cap.
  const size_t layer = 262144;  // floats
  const auto buckets = tp::plan_buckets(7, layer, 2.5);
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0].highest_layer, 6);
  EXPECT_EQ(buckets[0].lowest_layer, 4);
  EXPECT_EQ(buckets[1].highest_layer, 3);
  EXPECT_EQ(buckets[1].lowest_layer, 1);
  EXPECT_EQ(buckets[2].highest_layer, 0);
  EXPECT_EQ(buckets[2].lowest_layer, 0);
}

TEST(BucketPlan, CoversTheBufferExactlyOnce) {
  for (double cap : {0.001, 0.5, 3.0, 1000.0}) {
    const auto buckets = tp::plan_buckets(5, 1000, cap);
    size_t end = 5 * 1000;
    for (const auto& b : buckets) {
      EXPECT_EQ(b.offset + b.count, end) << cap;
      EXPECT_EQ(b.offset, size_t(b.lowest_layer) * 1000);
      end = b.offset;
    }
    EXPECT_EQ(end, 0u);
  }
}

TEST(BucketPlan, OversizedLayerGetsItsOwnBucket) {
  EXPECT_EQ(tp::plan_buckets(3, 1 << 20, 0.1).size(), 3u);
  EXPECT_EQ(tp::plan_buckets(3, 1 << 20, 1e6).size(), 1u);
}
