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
    const auto buckets = tp::plan_buckets(5, 1024, cap);
    size_t end = 5 * 1024;
    for (const auto& b : buckets) {
      EXPECT_EQ(b.offset + b.count, end) << cap;
      EXPECT_EQ(b.offset, size_t(b.lowest_layer) * 1024) << "already aligned";
      end = b.offset;
    }
    EXPECT_EQ(end, 0u);
  }
}

// hidden 30: 900-float layers. Each bucket starts at its lowest layer rounded up to 64 floats
// (256 bytes), and never before an element its layers have not finished.
TEST(BucketPlan, BucketsStartOn256ByteBoundariesWhateverTheLayerSize) {
  const size_t layer = 900;
  const auto buckets = tp::plan_buckets(5, layer, 1e-9);  // one bucket per layer
  ASSERT_EQ(buckets.size(), 5u);
  size_t end = 5 * layer;
  for (const auto& b : buckets) {
    EXPECT_EQ(b.offset + b.count, end);
    EXPECT_EQ(b.offset * sizeof(float) % 256, 0u) << "layer " << b.lowest_layer;
    EXPECT_GE(b.offset, size_t(b.lowest_layer) * layer) << "holds only finished layers";
    EXPECT_LT(b.offset, size_t(b.lowest_layer) * layer + tp::kBucketAlignFloats);
    end = b.offset;
  }
  EXPECT_EQ(end, 0u);
  EXPECT_EQ(buckets[3].offset, 960u) << "layer 1 starts at 900, rounded up";
}

TEST(BucketPlan, OversizedLayerGetsItsOwnBucket) {
  EXPECT_EQ(tp::plan_buckets(3, 1 << 20, 0.1).size(), 3u);
  EXPECT_EQ(tp::plan_buckets(3, 1 << 20, 1e6).size(), 1u);
}

// 16-float layers: the alignment swallows whole layers, whose elements travel in the last bucket.
TEST(BucketPlan, LayersSmallerThanTheAlignmentLeaveNoEmptyBucket) {
  const auto buckets = tp::plan_buckets(5, 16, 1e-9);
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].offset, 64u);
  EXPECT_EQ(buckets[0].count, 16u);
  EXPECT_EQ(buckets[1].offset, 0u);
  EXPECT_EQ(buckets[1].count, 64u);
  EXPECT_EQ(buckets[1].lowest_layer, 0);
  EXPECT_EQ(buckets[1].highest_layer, 3);
}
