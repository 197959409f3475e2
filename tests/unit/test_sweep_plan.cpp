// The sweep's sizes and counts, and the check every backend makes of a call before running it.
#include <gtest/gtest.h>

#include "fabric/sweep_runner.h"

namespace {

using tp::CollectiveCall;
using tp::CollectiveOp;
using tp::ElementType;

TEST(SweepSizes, DoubleFromMinToMaxInclusive) {
  EXPECT_EQ(tp::sweep_sizes(8, 64, 2), (std::vector<uint64_t>{8, 16, 32, 64}));
  EXPECT_EQ(tp::sweep_sizes(1024, 1024, 2), (std::vector<uint64_t>{1024}));
}

TEST(SweepSizes, MaxIsKeptWhenTheProgressionOvershootsIt) {
  EXPECT_EQ(tp::sweep_sizes(8, 100, 4), (std::vector<uint64_t>{8, 32, 100}));
}

TEST(SweepSizes, AFactorBelowTwoStillGrowsEveryStep) {
  const auto sizes = tp::sweep_sizes(1, 10, 1.5);
  ASSERT_FALSE(sizes.empty());
  for (size_t i = 1; i < sizes.size(); ++i) EXPECT_GT(sizes[i], sizes[i - 1]);
  EXPECT_EQ(sizes.back(), 10u);
}

TEST(SweepSizes, EachSizeIsAtLeastOneElementAboveTheLast) {
  EXPECT_EQ(tp::sweep_sizes(4, 16, 1.1, 4), (std::vector<uint64_t>{4, 8, 12, 16}));
  EXPECT_EQ(tp::sweep_sizes(1024, 1036, 1.0000000000000002, 4),
            (std::vector<uint64_t>{1024, 1028, 1032, 1036}));
}

TEST(SweepSizes, AFactorTooCloseToOneStopsOneSizePastTheLimit) {
  // The caller refuses the plan when it sees more than kMaxSweepSizes.
  EXPECT_EQ(tp::sweep_sizes(1024, uint64_t(16) << 30, 1.000001).size(), tp::kMaxSweepSizes + 1);
  EXPECT_EQ(tp::sweep_sizes(1, uint64_t(1) << 40, 1.0000000000000002).size(),
            tp::kMaxSweepSizes + 1);
  EXPECT_LE(tp::sweep_sizes(1, uint64_t(16) << 30, 1.5).size(), tp::kMaxSweepSizes);
}

TEST(RowCount, WholeElementsAndAMultipleOfTheRanksWhereTheOpDividesTheBuffer) {
  EXPECT_EQ(tp::row_count(CollectiveOp::allreduce, ElementType::f32, 3, 1000), 250u);
  EXPECT_EQ(tp::row_count(CollectiveOp::allgather, ElementType::f32, 3, 1000), 249u);
  EXPECT_EQ(tp::row_count(CollectiveOp::reducescatter, ElementType::bf16, 4, 1002), 500u);
  EXPECT_EQ(tp::row_count(CollectiveOp::alltoall, ElementType::i32, 8, 16), 0u);
  EXPECT_EQ(tp::row_count(CollectiveOp::sendrecv, ElementType::f16, 8, 6), 3u);
}

CollectiveCall call(CollectiveOp op, size_t send, size_t recv) {
  static char buffer[64];
  CollectiveCall c;
  c.op = op;
  c.send = buffer;
  c.recv = buffer;
  c.send_count = send;
  c.recv_count = recv;
  return c;
}

TEST(InvalidCall, CountsMustMatchTheOperation) {
  EXPECT_EQ(tp::invalid_call(call(CollectiveOp::allreduce, 8, 8), 4), "");
  EXPECT_NE(tp::invalid_call(call(CollectiveOp::allreduce, 8, 4), 4), "");
  EXPECT_EQ(tp::invalid_call(call(CollectiveOp::allgather, 2, 8), 4), "");
  EXPECT_NE(tp::invalid_call(call(CollectiveOp::allgather, 2, 6), 4), "");
  EXPECT_EQ(tp::invalid_call(call(CollectiveOp::reducescatter, 8, 2), 4), "");
  EXPECT_NE(tp::invalid_call(call(CollectiveOp::reducescatter, 8, 8), 4), "");
  EXPECT_EQ(tp::invalid_call(call(CollectiveOp::alltoall, 8, 8), 4), "");
  EXPECT_NE(tp::invalid_call(call(CollectiveOp::alltoall, 6, 6), 4), "");
}

TEST(InvalidCall, PeersAndRootMustBeInTheGroup) {
  CollectiveCall c = call(CollectiveOp::sendrecv, 4, 4);
  c.send_to = 1;
  c.recv_from = -1;  // a one-way transfer of the pairwise pass
  EXPECT_EQ(tp::invalid_call(c, 2), "");
  c.send_to = 2;
  EXPECT_NE(tp::invalid_call(c, 2), "");
  c.send_to = 1;
  c.in_place = true;
  EXPECT_NE(tp::invalid_call(c, 2), "");
  CollectiveCall b = call(CollectiveOp::broadcast, 4, 4);
  b.root = 3;
  EXPECT_NE(tp::invalid_call(b, 3), "");
  b.root = 2;
  EXPECT_EQ(tp::invalid_call(b, 3), "");
}

}  // namespace

namespace {

constexpr uint64_t kMiBytes = uint64_t(1) << 20;

// sweep.max_bytes=0: 64 MiB up to 32 ranks, doubled as the ranks double, at most 16 GiB.
TEST(SweepSizes, TheAutomaticLargestSizeGrowsWithTheRanks) {
  EXPECT_EQ(tp::auto_sweep_max_bytes(1, 0), 64 * kMiBytes);
  EXPECT_EQ(tp::auto_sweep_max_bytes(32, 0), 64 * kMiBytes);
  EXPECT_EQ(tp::auto_sweep_max_bytes(33, 0), 128 * kMiBytes);
  EXPECT_EQ(tp::auto_sweep_max_bytes(512, 0), 1024 * kMiBytes);
  EXPECT_EQ(tp::auto_sweep_max_bytes(4096, 0), 8192 * kMiBytes);
  EXPECT_EQ(tp::auto_sweep_max_bytes(4097, 0), 16384 * kMiBytes);
  EXPECT_EQ(tp::auto_sweep_max_bytes(1 << 20, 0), 16384 * kMiBytes);
  // Never below the size the gate judges at, within the same ceiling.
  EXPECT_EQ(tp::auto_sweep_max_bytes(16, 256 * kMiBytes), 256 * kMiBytes);
  EXPECT_EQ(tp::auto_sweep_max_bytes(16, uint64_t(64) << 30), 16384 * kMiBytes);
}

// Halved until the host's ranks fit in 90% of its available memory (6 x max_bytes a rank on MPI
// for float32: two buffers, the input, the result, the expected result).
TEST(SweepSizes, TheAutomaticSizeIsHalvedToFitTheHost) {
  const uint64_t gib = uint64_t(1) << 30;
  // 8 ranks of 8 GiB rows need 8 x 48 GiB; 100 GiB holds 8 x 1 GiB rows (48 GiB).
  EXPECT_EQ(tp::fit_sweep_max_bytes(8 * gib, 1024, tp::ElementType::f32, true, 8, 100 * gib),
            1 * gib);
  EXPECT_EQ(tp::fit_sweep_max_bytes(64 * kMiBytes, 1024, tp::ElementType::f32, true, 8, 100 * gib),
            64 * kMiBytes)
      << "what fits is kept";
  EXPECT_EQ(
      tp::fit_sweep_max_bytes(64 * kMiBytes, 32 * kMiBytes, tp::ElementType::f32, true, 8, gib), 0u)
      << "not even sweep.min_bytes fits: the memory check names it";
}

}  // namespace
