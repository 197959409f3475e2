// The rule that names who a stalled job waits for (train/culprits.h), over made-up heartbeat
// records: two reads of four ranks, every phase a rank can stop in, every place the ranks blocked
// behind it can wait at.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "train/culprits.h"

namespace {

using tp::Culprit;
using tp::HeartbeatRecord;

struct Position {
  int64_t step;
  const char* phase;
};

HeartbeatRecord record(int rank, Position at, int64_t liveness) {
  HeartbeatRecord h;
  h.rank = rank;
  h.step = at.step;
  h.phase = at.phase;
  h.host = "node-" + std::to_string(rank);
  h.present = true;
  h.liveness = liveness;
  return h;
}

HeartbeatRecord absent(int rank) {
  HeartbeatRecord h;
  h.rank = rank;
  return h;
}

// Two reads of ranks that stand where `at` says; the ranks in `stopped` count no further.
std::pair<std::vector<HeartbeatRecord>, std::vector<HeartbeatRecord>> two_reads(
    const std::vector<Position>& at, const std::vector<int>& stopped) {
  std::vector<HeartbeatRecord> first, second;
  for (int r = 0; r < int(at.size()); ++r) {
    const bool frozen = std::find(stopped.begin(), stopped.end(), r) != stopped.end();
    first.push_back(record(r, at[r], 100 + r));
    second.push_back(record(r, at[r], frozen ? 100 + r : 120 + r));
  }
  return {first, second};
}

std::vector<int> ranks(const tp::Verdict& verdict) {
  std::vector<int> named;
  for (const Culprit& c : verdict.culprits) named.push_back(c.last.rank);
  return named;
}

std::vector<int> named(const std::vector<Position>& at, const std::vector<int>& stopped) {
  const auto [first, second] = two_reads(at, stopped);
  return ranks(tp::name_culprits(first, second));
}

// Every place a live rank can wait at while one rank is stopped in step 5: earlier phases of step
// 5 (it had not got there yet either), the same phase, the phases after it, and step 6.
const std::vector<Position> kWaitingAt = {{5, "data"},      {5, "compute"},    {5, "comm"},
                                          {5, "optimizer"}, {5, "checkpoint"}, {6, "data"},
                                          {6, "compute"},   {6, "comm"}};
const std::vector<Position> kStoppedAt = {{5, "data"},      {5, "compute"},    {5, "comm"},
                                          {5, "optimizer"}, {5, "checkpoint"}, {0, "start"},
                                          {12, "done"}};

TEST(Culprits, TheStoppedRankAloneWhereverItAndTheRanksBehindItStand) {
  for (const Position stop : kStoppedAt)
    for (int culprit = 0; culprit < 4; ++culprit) {
      // The three others, each at any of the waiting places: 8^3 layouts.
      for (int layout = 0; layout < 8 * 8 * 8; ++layout) {
        std::vector<Position> at(4);
        for (int r = 0, code = layout; r < 4; ++r) {
          if (r == culprit) {
            at[r] = stop;
          } else {
            at[r] = kWaitingAt[code % 8];
            code /= 8;
          }
        }
        ASSERT_EQ(named(at, {culprit}), std::vector<int>{culprit})
            << "rank " << culprit << " stopped in step " << stop.step << " " << stop.phase
            << ", layout " << layout;
      }
    }
}

TEST(Culprits, AStoppedRankSaysWhy) {
  const auto [first, second] = two_reads({{5, "comm"}, {5, "comm"}, {5, "comm"}, {5, "comm"}}, {2});
  const tp::Verdict verdict = tp::name_culprits(first, second);
  ASSERT_EQ(verdict.culprits.size(), 1u);
  EXPECT_EQ(verdict.culprits[0].why, Culprit::Why::stopped);
  EXPECT_EQ(verdict.culprits[0].last.host, "node-2");
  EXPECT_EQ(verdict.culprits[0].last.phase, "comm");
  EXPECT_EQ(verdict.furthest.rank, 0);  // a tie goes to the lowest rank
}

// The case heartbeats alone got wrong: rank 0 waits in step 5's checkpoint for the checksum of
// rank 3, which stopped there; ranks 1 and 2 sent theirs and went on to step 6.
TEST(Culprits, AnInnocentRankZeroBehindTheOthersIsNotNamed) {
  EXPECT_EQ(named({{5, "checkpoint"}, {6, "comm"}, {6, "comm"}, {5, "checkpoint"}}, {3}),
            std::vector<int>{3});
}

TEST(Culprits, StoppedRankZero) {
  EXPECT_EQ(named({{5, "compute"}, {5, "comm"}, {5, "comm"}, {5, "comm"}}, {0}),
            std::vector<int>{0});
  EXPECT_EQ(named({{5, "comm"}, {5, "comm"}, {5, "comm"}, {5, "comm"}}, {0}), std::vector<int>{0});
}

TEST(Culprits, EveryStoppedRankIsNamedInRankOrder) {
  EXPECT_EQ(named({{5, "comm"}, {5, "comm"}, {5, "compute"}, {6, "comm"}}, {3, 1}),
            (std::vector<int>{1, 3}));
  EXPECT_EQ(named({{5, "comm"}, {5, "comm"}, {5, "comm"}, {5, "comm"}}, {0, 1, 2, 3}),
            (std::vector<int>{0, 1, 2, 3}));
}

// Every rank alive: a rank whose step is stuck while its watchdog runs (a hang) is behind the
// furthest rank, whoever reads.
TEST(Culprits, WhenEveryRankIsAliveTheRanksBehindTheFurthestAreNamed) {
  const auto [first, second] =
      two_reads({{5, "comm"}, {5, "compute"}, {5, "comm"}, {5, "data"}}, {});
  const tp::Verdict verdict = tp::name_culprits(first, second);
  EXPECT_EQ(ranks(verdict), (std::vector<int>{1, 3}));
  EXPECT_EQ(verdict.culprits[0].why, Culprit::Why::behind);
  EXPECT_EQ(verdict.furthest.rank, 0);
  EXPECT_EQ(named({{6, "comm"}, {5, "checkpoint"}, {6, "comm"}, {6, "comm"}}, {}),
            std::vector<int>{1});
  EXPECT_EQ(named({{5, "optimizer"}, {6, "data"}, {6, "data"}, {6, "data"}}, {}),
            std::vector<int>{0});
}

TEST(Culprits, EveryRankAliveAndLevelNamesNobody) {
  EXPECT_TRUE(named({{5, "comm"}, {5, "comm"}, {5, "comm"}, {5, "comm"}}, {}).empty());
}

TEST(Culprits, ARankWithoutAHeartbeatIsNamedAndSoIsAStoppedOne) {
  auto [first, second] = two_reads({{3, "comm"}, {3, "comm"}, {3, "comm"}, {3, "comm"}}, {1});
  first[2] = absent(2);
  second[2] = absent(2);
  const tp::Verdict verdict = tp::name_culprits(first, second);
  ASSERT_EQ(ranks(verdict), (std::vector<int>{1, 2}));
  EXPECT_EQ(verdict.culprits[0].why, Culprit::Why::stopped);
  EXPECT_EQ(verdict.culprits[1].why, Culprit::Why::no_heartbeat);
  EXPECT_STREQ(tp::why_name(verdict.culprits[1].why), "no heartbeat");
}

// A rank whose watchdog has not counted yet (or only since the first read) is not known to be
// stopped; it may still be behind.
TEST(Culprits, ACounterNotSeenTwiceIsNoEvidenceOfAStop) {
  auto [first, second] = two_reads({{5, "comm"}, {5, "compute"}, {5, "comm"}, {5, "comm"}}, {1});
  first[1].liveness = -1;
  second[1].liveness = -1;
  EXPECT_EQ(ranks(tp::name_culprits(first, second)), std::vector<int>{1});
  EXPECT_EQ(tp::name_culprits(first, second).culprits[0].why, Culprit::Why::behind);
  first[1].liveness = -1;
  second[1].liveness = 4;
  EXPECT_EQ(tp::name_culprits(first, second).culprits[0].why, Culprit::Why::behind);
  // The same with every rank level: nothing names it.
  auto [level_first, level_second] =
      two_reads({{5, "comm"}, {5, "comm"}, {5, "comm"}, {5, "comm"}}, {});
  level_first[3].liveness = level_second[3].liveness = -1;
  EXPECT_TRUE(tp::name_culprits(level_first, level_second).culprits.empty());
}

// A rank whose watchdog aborted the job (or whose run ended) stops counting on purpose.
TEST(Culprits, ARankThatEndedOnPurposeIsNotStopped) {
  auto [first, second] = two_reads({{5, "comm"}, {5, "comm"}, {5, "comm"}, {5, "compute"}}, {0});
  second[0].watch_ended = true;
  EXPECT_EQ(named({{5, "comm"}, {5, "comm"}, {5, "comm"}, {5, "compute"}}, {0}),
            std::vector<int>{0});
  EXPECT_EQ(ranks(tp::name_culprits(first, second)), std::vector<int>{3});
  first[0].watch_ended = true;
  EXPECT_EQ(ranks(tp::name_culprits(first, second)), std::vector<int>{3});
}

TEST(Culprits, AHeartbeatThatVanishedBetweenTheReadsIsNamedAsMissing) {
  auto [first, second] = two_reads({{5, "comm"}, {5, "comm"}, {5, "comm"}}, {});
  second[1] = absent(1);
  const tp::Verdict verdict = tp::name_culprits(first, second);
  ASSERT_EQ(ranks(verdict), std::vector<int>{1});
  EXPECT_EQ(verdict.culprits[0].why, Culprit::Why::no_heartbeat);
}

}  // namespace
