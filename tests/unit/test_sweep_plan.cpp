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
