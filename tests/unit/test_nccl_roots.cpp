// How many ranks create an NCCL id, and which (mpi/nccl_roots.h).
#include <gtest/gtest.h>

#include "common/errors.h"
#include "mpi/nccl_roots.h"

namespace {

constexpr int kNccl228 = 22809;

// Each root's block: from its rank to the next root's (or the end).
std::vector<int> block_sizes(const tp::NcclRootPlan& plan, int size) {
  std::vector<int> sizes;
  for (size_t i = 0; i < plan.roots.size(); ++i)
    sizes.push_back((i + 1 < plan.roots.size() ? plan.roots[i + 1] : size) - plan.roots[i]);
  return sizes;
}

TEST(NcclRoots, OneRootUpToRanksPerRoot) {
  for (int size : {1, 127, 128}) {
    const tp::NcclRootPlan plan = tp::plan_nccl_roots(size, 128, kNccl228);
    EXPECT_EQ(plan.roots, std::vector<int>{0}) << size;
    EXPECT_TRUE(plan.scalable) << size;
  }
}

TEST(NcclRoots, OneRankPastTheBlockSplitsItInTwoEvenHalves) {
  const tp::NcclRootPlan plan = tp::plan_nccl_roots(129, 128, kNccl228);
  EXPECT_EQ(plan.roots, (std::vector<int>{0, 65}));
  EXPECT_EQ(block_sizes(plan, 129), (std::vector<int>{65, 64}));
  EXPECT_EQ(tp::root_index_of(plan, 65), 1);
  EXPECT_EQ(tp::root_index_of(plan, 64), -1);
}

TEST(NcclRoots, FourThousandNinetySixRanksHaveThirtyTwoRootsEvery128) {
  const tp::NcclRootPlan plan = tp::plan_nccl_roots(4096, 128, kNccl228);
  ASSERT_EQ(plan.roots.size(), 32u);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(plan.roots[size_t(i)], 128 * i);
  EXPECT_NE(plan.note.find("32 roots"), std::string::npos) << plan.note;
}

TEST(NcclRoots, OneRankMoreAddsARootAndKeepsTheBlocksWithinOneOfEachOther) {
  const tp::NcclRootPlan plan = tp::plan_nccl_roots(4097, 128, kNccl228);
  ASSERT_EQ(plan.roots.size(), 33u);
  const std::vector<int> sizes = block_sizes(plan, 4097);
  int total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(sizes[i], i < 5 ? 125 : 124) << i;  // 4097 = 33 x 124 + 5
    total += sizes[i];
  }
  EXPECT_EQ(total, 4097);
  EXPECT_EQ(plan.roots[1], 125);
  EXPECT_EQ(plan.roots.back(), 4097 - 124);
}

TEST(NcclRoots, AnNcclOlderThan223FallsBackToOneRootAndSaysWhy) {
  const tp::NcclRootPlan plan = tp::plan_nccl_roots(4096, 128, 22205);
  EXPECT_EQ(plan.roots, std::vector<int>{0});
  EXPECT_FALSE(plan.scalable);
  EXPECT_NE(plan.note.find("NCCL 2.22.5 predates ncclCommInitRankScalable"), std::string::npos)
      << plan.note;
  EXPECT_NE(plan.note.find("32 roots were wanted"), std::string::npos) << plan.note;
}

TEST(NcclRoots, TheFirstScalableReleaseIsUsed) {
  EXPECT_TRUE(tp::plan_nccl_roots(256, 128, 22300).scalable);
  EXPECT_FALSE(tp::plan_nccl_roots(256, 128, 22299).scalable);
}

TEST(NcclRoots, ANonPositiveRanksPerRootNamesTheOption) {
  try {
    tp::plan_nccl_roots(8, 0, kNccl228);
    FAIL() << "expected a usage error";
  } catch (const tp::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("comm.ranks_per_root=0"), std::string::npos);
  }
}

}  // namespace
