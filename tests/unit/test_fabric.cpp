// The sweep's bandwidth formulas, the pairwise schedule and the judgement of a pairwise matrix
// (docs/sweep.md), checked against values worked out by hand.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <set>

#include "common/errors.h"
#include "fabric/bus_bandwidth.h"
#include "fabric/pair_judgement.h"
#include "fabric/pairwise.h"
#include "fabric/tournament.h"

namespace {

using ::testing::HasSubstr;
using tp::CollectiveOp;

TEST(BusBandwidth, FactorsMatchNcclTests) {
  // 8 ranks: allreduce 2*7/8, the gathers and scatters 7/8, broadcast and sendrecv 1.
  EXPECT_DOUBLE_EQ(tp::busbw_factor(CollectiveOp::allreduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(tp::busbw_factor(CollectiveOp::allgather, 8), 0.875);
  EXPECT_DOUBLE_EQ(tp::busbw_factor(CollectiveOp::reducescatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(tp::busbw_factor(CollectiveOp::alltoall, 8), 0.875);
  EXPECT_DOUBLE_EQ(tp::busbw_factor(CollectiveOp::broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(tp::busbw_factor(CollectiveOp::sendrecv, 8), 1.0);
  // 3 ranks: 4/3 and 2/3.
  EXPECT_DOUBLE_EQ(tp::busbw_factor(CollectiveOp::allreduce, 3), 4.0 / 3.0);
  EXPECT_DOUBLE_EQ(tp::busbw_factor(CollectiveOp::allgather, 3), 2.0 / 3.0);
  // One rank: nothing crosses a link.
  EXPECT_DOUBLE_EQ(tp::busbw_factor(CollectiveOp::allreduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(tp::busbw_factor(CollectiveOp::alltoall, 1), 0.0);
}

TEST(BusBandwidth, WorkedExample) {
  // docs/sweep.md: 256 MiB allreduced by 8 ranks in 20 ms is 13.42 GB/s algbw, 23.49 busbw.
  const uint64_t bytes = uint64_t(256) << 20;
  EXPECT_NEAR(tp::algbw_gbps(bytes, 0.020), 13.4217728, 1e-9);
  EXPECT_NEAR(tp::busbw_gbps(CollectiveOp::allreduce, 8, bytes, 0.020), 23.4881024, 1e-9);
  EXPECT_EQ(tp::algbw_gbps(bytes, 0.0), 0.0);
}

TEST(BusBandwidth, OperationListsParseInTheSweepsOrder) {
  EXPECT_EQ(tp::parse_sweep_ops("all", "sweep.ops"), tp::all_sweep_ops());
  EXPECT_EQ(tp::parse_sweep_ops("sendrecv,allreduce,sendrecv", "sweep.ops"),
            (std::vector<CollectiveOp>{CollectiveOp::allreduce, CollectiveOp::sendrecv}));
  for (const CollectiveOp op : tp::all_sweep_ops())
    EXPECT_EQ(tp::parse_sweep_op(tp::sweep_op_name(op)), op);
  try {
    tp::parse_sweep_ops("allreduce,gather", "sweep.ops");
    ADD_FAILURE() << "an unknown operation must be refused";
  } catch (const tp::UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("sweep.ops"));
    EXPECT_THAT(e.what(), HasSubstr("'gather'"));
  }
  EXPECT_THROW(tp::parse_sweep_ops("", "sweep.ops"), tp::UsageError);
}

TEST(Tournament, EveryPairMeetsOnceInDisjointRounds) {
  EXPECT_TRUE(tp::round_robin(1).empty());
  for (int n = 2; n <= 9; ++n) {
    const auto rounds = tp::round_robin(n);
    EXPECT_EQ(int(rounds.size()), n % 2 == 0 ? n - 1 : n) << n << " nodes";
    std::set<tp::NodePair> met;
    for (const auto& round : rounds) {
      std::set<int> busy;
      EXPECT_EQ(int(round.size()), n / 2) << n << " nodes: one node sits out when n is odd";
      for (const auto& [a, b] : round) {
        EXPECT_LT(a, b);
        EXPECT_TRUE(busy.insert(a).second && busy.insert(b).second) << "a node twice in a round";
        EXPECT_TRUE(met.insert({a, b}).second) << a << "-" << b << " met twice, n=" << n;
      }
    }
    EXPECT_EQ(int(met.size()), n * (n - 1) / 2) << n << " nodes: every pair exactly once";
  }
}

// A full matrix of `gbps` between n nodes, the diagonal unmeasured.
tp::PairMatrix uniform(int n, double gbps) {
  tp::PairMatrix m(size_t(n), std::vector<double>(size_t(n), gbps));
  for (int i = 0; i < n; ++i) m[size_t(i)][size_t(i)] = -1;
  return m;
}

TEST(PairJudgement, AHealthyFabricFlagsNothing) {
  for (int n = 3; n <= 6; ++n) {
    tp::PairMatrix m = uniform(n, 10.0);
    m[0][1] = 9.0;  // ordinary spread
    const tp::PairJudgement j = tp::judge_pairs(m, 0.8, 0.5);
    EXPECT_TRUE(j.nodes.empty()) << n;
    EXPECT_TRUE(j.links.empty()) << n;
    EXPECT_EQ(j.note, "");
  }
}

TEST(PairJudgement, ANodeWhoseReceiveIsThrottledIsNamedWithItsDirection) {
  for (int n = 3; n <= 5; ++n) {
    tp::PairMatrix m = uniform(n, 0.095);
    const int slow = n - 1;
    for (int a = 0; a < slow; ++a) m[size_t(a)][size_t(slow)] = 0.0036;  // everyone -> slow
    const tp::PairJudgement j = tp::judge_pairs(m, 0.8, 0.5);
    ASSERT_EQ(j.nodes.size(), 1u) << n << " nodes";
    EXPECT_EQ(j.nodes[0].node, slow);
    EXPECT_EQ(j.nodes[0].direction, "receive");
    EXPECT_TRUE(j.nodes[0].fail) << "4% is below the fail fraction";
    EXPECT_TRUE(j.links.empty()) << "the slow node explains its slow pairs";
    EXPECT_DOUBLE_EQ(j.nodes[0].median_gbps, 0.0036);
    EXPECT_DOUBLE_EQ(j.nodes[0].reference_gbps, 0.095);
  }
}

TEST(PairJudgement, AThrottledNodeIsFlaggedInBothDirections) {
  tp::PairMatrix m = uniform(4, 10.0);
  for (int a = 0; a < 3; ++a) m[size_t(a)][3] = m[3][size_t(a)] = 6.0;  // 60%: flag, not fail
  const tp::PairJudgement j = tp::judge_pairs(m, 0.8, 0.5);
  ASSERT_EQ(j.nodes.size(), 2u);
  EXPECT_EQ(j.nodes[0].node, 3);
  EXPECT_EQ(j.nodes[0].direction, "send");
  EXPECT_EQ(j.nodes[1].direction, "receive");
  EXPECT_FALSE(j.nodes[0].fail);
}

TEST(PairJudgement, ASlowPairBetweenHealthyNodesIsABadLink) {
  for (int n = 3; n <= 5; ++n) {
    tp::PairMatrix m = uniform(n, 10.0);
    m[0][1] = 2.0;  // one direction of one cable
    const tp::PairJudgement j = tp::judge_pairs(m, 0.8, 0.5);
    EXPECT_TRUE(j.nodes.empty()) << n << " nodes: one slow pair does not make a node slow";
    ASSERT_EQ(j.links.size(), 1u) << n << " nodes";
    EXPECT_EQ(j.links[0].from, 0);
    EXPECT_EQ(j.links[0].to, 1);
    EXPECT_TRUE(j.links[0].fail);
    EXPECT_DOUBLE_EQ(j.links[0].reference_gbps, 10.0);
  }
}

TEST(PairJudgement, RatesReadInFixedNotationWithThreeDigits) {
  EXPECT_EQ(tp::rate_text(0.0036), "3.60 MB/s");
  EXPECT_EQ(tp::rate_text(0.095), "95.0 MB/s");
  EXPECT_EQ(tp::rate_text(0.99999), "1.00 GB/s");
  EXPECT_EQ(tp::rate_text(123.456), "123 GB/s");
  EXPECT_EQ(tp::rate_text(1234.4), "1234 GB/s");
  EXPECT_EQ(tp::rate_text(0.0000012), "0.001 MB/s");
}

TEST(PairJudgement, FewerThanThreeNodesAreNotJudged) {
  tp::PairMatrix m = uniform(2, 10.0);
  m[0][1] = 0.1;
  const tp::PairJudgement j = tp::judge_pairs(m, 0.8, 0.5);
  EXPECT_TRUE(j.nodes.empty());
  EXPECT_TRUE(j.links.empty());
  EXPECT_THAT(j.note, HasSubstr("3 nodes or more"));
}

}  // namespace

namespace {

TEST(PairTimeBound, OnlyAPairFarSlowerThanTheFastestMovesFewerBytes) {
  const uint64_t full = 16u << 20, floor = 1u << 18;
  // Within twice the fastest: every byte.
  EXPECT_EQ(tp::time_bounded_count(full, floor, 0.2, 0.1, 2.0), full);
  // Ten times the fastest: what fits in twice its time, a fifth.
  EXPECT_EQ(tp::time_bounded_count(full, floor, 1.0, 0.1, 2.0), full / 5);
  // Slower still: never below the floor.
  EXPECT_EQ(tp::time_bounded_count(full, floor, 1000.0, 0.1, 2.0), floor);
  // No pair estimated anywhere (every rank idle): nothing to bound against.
  EXPECT_EQ(tp::time_bounded_count(full, floor, 1.0, std::numeric_limits<double>::infinity(), 2.0),
            full);
}

}  // namespace

namespace {

// The rule judge_pairs documents, written the slow way: a fresh median per node and per pair.
double brute_median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

std::vector<std::pair<int, int>> brute_links(const tp::PairMatrix& m, double flag) {
  const int n = int(m.size());
  std::vector<bool> flagged(size_t(n), false);
  for (const tp::NodeFlag& f : tp::judge_pairs(m, flag, 0.5).nodes) flagged[size_t(f.node)] = true;
  std::vector<std::pair<int, int>> links;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a == b || m[size_t(a)][size_t(b)] < 0 || flagged[size_t(a)] || flagged[size_t(b)])
        continue;
      std::vector<double> others, but_this;
      for (int x = 0; x < n; ++x)
        for (int y = 0; y < n; ++y) {
          if (x == y || m[size_t(x)][size_t(y)] < 0) continue;
          if (x != a && x != b && y != a && y != b) others.push_back(m[size_t(x)][size_t(y)]);
          if (!(x == a && y == b)) but_this.push_back(m[size_t(x)][size_t(y)]);
        }
      const double reference = brute_median(others.empty() ? but_this : others);
      if (reference > 0 && m[size_t(a)][size_t(b)] < flag * reference) links.push_back({a, b});
    }
  return links;
}

// The fast medians give the slow rule's answer on random matrices with ties and gaps.
TEST(PairJudgement, TheFastMediansAgreeWithTheRuleOnRandomMatrices) {
  uint64_t state = 12345;
  const auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return int((state >> 33) % 20);
  };
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 3 + trial % 12;
    tp::PairMatrix m(size_t(n), std::vector<double>(size_t(n), -1));
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        if (a != b && next() != 0) m[size_t(a)][size_t(b)] = 1 + next();  // ties, and gaps
    const tp::PairJudgement fast = tp::judge_pairs(m, 0.8, 0.5);
    std::vector<std::pair<int, int>> links;
    for (const tp::LinkFlag& l : fast.links) links.push_back({l.from, l.to});
    EXPECT_EQ(links, brute_links(m, 0.8)) << "trial " << trial << ", " << n << " nodes";
    for (const tp::NodeFlag& f : fast.nodes) {
      std::vector<double> others;
      for (int x = 0; x < n; ++x)
        for (int y = 0; y < n; ++y)
          if (x != y && x != f.node && y != f.node && m[size_t(x)][size_t(y)] >= 0)
            others.push_back(m[size_t(x)][size_t(y)]);
      EXPECT_DOUBLE_EQ(f.reference_gbps, brute_median(others)) << "trial " << trial;
    }
  }
}

}  // namespace
