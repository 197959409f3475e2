#include <gtest/gtest.h>

#include "kernels/model_spec.h"

TEST(ModelSpec, ParametersAndFlops) {
  tp::ModelSpec m{3, 32, 8, 16};
  EXPECT_EQ(m.parameters(), 3 * 32 * 32);
  // One GEMM of a sample is 2*seq*h*h; forward 3, weight grads 3, input grads 2 (not layer 0).
  const double gemm = 2.0 * 8 * 32 * 32;
  EXPECT_DOUBLE_EQ(m.flops_per_sample(), gemm * 8);
  EXPECT_DOUBLE_EQ(m.flops_per_step(), gemm * 8 * 16);
  EXPECT_EQ(m.tokens_per_step(), 16 * 8);
}

TEST(ModelSpec, SingleLayerHasNoInputGradient) {
  tp::ModelSpec m{1, 4, 2, 1};
  EXPECT_DOUBLE_EQ(m.flops_per_sample(), 2.0 * (2.0 * 2 * 4 * 4));
}

TEST(ModelSpec, HiddenForParameters) {
  EXPECT_EQ(tp::hidden_for_parameters(4 * 100 * 100, 4), 100);
  EXPECT_EQ(tp::hidden_for_parameters(4 * 100 * 100 - 1, 4), 99);
  EXPECT_EQ(tp::hidden_for_parameters(12 * 768 * 768, 12), 768);
}

TEST(ModelSpec, BatchSharesCoverTheGlobalBatchOnce) {
  for (int world : {1, 2, 3, 4, 7}) {
    int64_t next = 0;
    for (int r = 0; r < world; ++r) {
      const auto share = tp::batch_share(10, world, r);
      EXPECT_EQ(share.first, next);
      EXPECT_GE(share.samples, 10 / world);
      EXPECT_LE(share.samples, 10 / world + 1);
      next += share.samples;
    }
    EXPECT_EQ(next, 10);
  }
}
