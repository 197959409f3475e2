#include <gtest/gtest.h>

#include <vector>

#include "common/philox.h"

// Known-answer vectors of Philox4x32-10 from the Random123 distribution (kat_vectors).
TEST(Philox, KnownAnswers) {
  using tp::philox::philox4x32_10;
  EXPECT_EQ(philox4x32_10({{0, 0, 0, 0}}, {{0, 0}}),
            (tp::philox::Counter{{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}));
  EXPECT_EQ(
      philox4x32_10({{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}}, {{0xffffffff, 0xffffffff}}),
      (tp::philox::Counter{{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}));
}

TEST(Philox, UnitMapIsExactAndSymmetric) {
  EXPECT_EQ(tp::philox::to_symmetric_unit(0), -1.0f);
  EXPECT_EQ(tp::philox::to_symmetric_unit(0xffffffffu), 1.0f - 0x1p-23f);
  EXPECT_EQ(tp::philox::to_symmetric_unit(0x80000000u), 0.0f);
}

TEST(Philox, AnySubRangeIsReproducible) {
  std::vector<float> whole(37), tail(37);
  tp::philox::fill_uniform(whole.data(), 37, 5, tp::philox::kInputs, 11, 1.0f);
  tp::philox::fill_uniform(tail.data(), 37, 5, tp::philox::kInputs, 11, 1.0f);
  EXPECT_EQ(whole, tail);
  std::vector<float> other(37);
  tp::philox::fill_uniform(other.data(), 37, 5, tp::philox::kTargets, 11, 1.0f);
  EXPECT_NE(whole, other);  // streams are independent
  tp::philox::fill_uniform(other.data(), 37, 5, tp::philox::kInputs, 12, 1.0f);
  EXPECT_NE(whole, other);  // items are independent
}
