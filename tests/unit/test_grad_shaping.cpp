#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/grad_shaping.h"

namespace {

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

TEST(GradShaping, ContributionsLieOnTheGrid) {
  const auto grid = tp::make_grad_grid(8);
  for (float g : {0.3f, -1.7f, 1e-9f, 123.456f}) {
    const float c = tp::shape_contribution(g, grid);
    const float units = c / grid.quantum;
    EXPECT_EQ(units, std::round(units)) << g;
    EXPECT_LE(std::fabs(units), grid.max_units);
  }
}

TEST(GradShaping, ClampsAndDropsNaN) {
  const auto grid = tp::make_grad_grid(4);
  EXPECT_EQ(tp::shape_contribution(1e30f, grid), grid.max_units * grid.quantum);
  EXPECT_EQ(tp::shape_contribution(-1e30f, grid), -grid.max_units * grid.quantum);
  EXPECT_EQ(tp::shape_contribution(std::nanf(""), grid), 0.0f);
}

TEST(GradShaping, ClampKeepsEveryPartialSumExact) {
  for (int64_t batch : {1, 3, 8, 1000, 1 << 20}) {
    const auto grid = tp::make_grad_grid(batch);
    EXPECT_LE(double(grid.max_units) * double(batch), 16777216.0) << batch;
    EXPECT_LE(grid.max_units, 4194304.0f) << batch;  // round_to_integer's exact range
  }
}

TEST(GradShaping, RoundToIntegerTiesToEven) {
  EXPECT_EQ(tp::round_to_integer(2.5f), 2.0f);
  EXPECT_EQ(tp::round_to_integer(3.5f), 4.0f);
  EXPECT_EQ(tp::round_to_integer(-2.5f), -2.0f);
  EXPECT_EQ(tp::round_to_integer(1234567.4f), 1234567.0f);
}

// The property the digest rests on: shaped contributions sum to the same bits whatever the order
// and however the samples are split into per-rank partial sums.
TEST(GradShaping, SumIsBitIdenticalUnderAnyOrderAndPartition) {
  std::mt19937_64 rng(12345);
  std::normal_distribution<float> heavy(0.0f, 40.0f);
  for (int64_t batch : {2, 7, 64, 512}) {
    const auto grid = tp::make_grad_grid(batch);
    std::vector<float> contributions(batch);
    for (auto& c : contributions) c = tp::shape_contribution(heavy(rng), grid);

    float reference = 0.0f;
    for (float c : contributions) reference += c;
    for (int trial = 0; trial < 200; ++trial) {
      std::shuffle(contributions.begin(), contributions.end(), rng);
      const int ranks = 1 + int(rng() % 8);
      std::vector<float> partial(ranks, 0.0f);
      for (size_t i = 0; i < contributions.size(); ++i) partial[rng() % ranks] += contributions[i];
      std::shuffle(partial.begin(), partial.end(), rng);
      float total = 0.0f;
      for (float p : partial) total += p;
      ASSERT_EQ(bits(total), bits(reference)) << "batch " << batch << " trial " << trial;
    }
  }
}

// Negative control: without shaping, fp32 sums do depend on order, so the property above is not
// vacuous.
TEST(GradShaping, UnshapedSumsDependOnOrder) {
  std::mt19937_64 rng(99);
  std::normal_distribution<float> heavy(0.0f, 40.0f);
  std::vector<float> raw(512);
  for (auto& v : raw) v = heavy(rng);
  float reference = 0.0f;
  for (float v : raw) reference += v;
  bool differed = false;
  for (int trial = 0; trial < 50 && !differed; ++trial) {
    std::shuffle(raw.begin(), raw.end(), rng);
    float total = 0.0f;
    for (float v : raw) total += v;
    differed = bits(total) != bits(reference);
  }
  EXPECT_TRUE(differed);
}

}  // namespace

namespace {

// The vectorised pass must give the bits of the scalar definition, element by element.
TEST(GradShaping, VectorisedPassMatchesScalarDefinition) {
  std::mt19937_64 rng(3);
  std::normal_distribution<float> heavy(0.0f, 30.0f);
  const auto grid = tp::make_grad_grid(16);
  std::vector<float> grads(1027), acc(1027), expected(1027);
  for (size_t i = 0; i < grads.size(); ++i) {
    grads[i] = heavy(rng);
    acc[i] = expected[i] = float(int(i % 17) - 8) * grid.quantum;
  }
  grads[5] = std::nanf("");
  grads[6] = 1e30f;
  for (size_t i = 0; i < grads.size(); ++i) expected[i] += tp::shape_contribution(grads[i], grid);
  tp::shape_and_accumulate(grads.data(), acc.data(), grads.size(), grid);
  for (size_t i = 0; i < acc.size(); ++i) ASSERT_EQ(bits(acc[i]), bits(expected[i])) << i;
}

}  // namespace
