#include <gtest/gtest.h>

#include "checkpoint/slices.h"

namespace {

TEST(RankSlice, CoversEveryElementOnceInRankOrder) {
  for (uint64_t n : {0ull, 1ull, 7ull, 8ull, 1000ull, 1000003ull}) {
    for (int ranks : {1, 2, 3, 4, 7}) {
      uint64_t next = 0, smallest = n, largest = 0;
      for (int r = 0; r < ranks; ++r) {
        const tp::Slice s = tp::rank_slice(n, r, ranks);
        EXPECT_EQ(s.begin, next) << n << " " << ranks << " " << r;
        next = s.end;
        smallest = std::min(smallest, s.size());
        largest = std::max(largest, s.size());
      }
      EXPECT_EQ(next, n);
      EXPECT_LE(largest - smallest, 1u) << "unbalanced: n=" << n << " ranks=" << ranks;
    }
  }
}

TEST(Cut, TakesTheSameRangeOfEveryTensorAndKeepsAnEmptyMoment2Empty) {
  tp::TrainingState full;
  full.step = 9;
  for (int i = 0; i < 10; ++i) {
    full.params.push_back(float(i));
    full.moment1.push_back(float(-i));
  }
  const tp::TrainingState mine = tp::cut(full, {3, 6});
  EXPECT_EQ(mine.step, 9);
  EXPECT_EQ(mine.params, (std::vector<float>{3, 4, 5}));
  EXPECT_EQ(mine.moment1, (std::vector<float>{-3, -4, -5}));
  EXPECT_TRUE(mine.moment2.empty());
}

}  // namespace
