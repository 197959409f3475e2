// The deadline a collective's waits keep against the watchdog (mpi/comm_deadline.h): its share of
// the watchdog's timeout, the timeout it learns with the watchdog, and a collective that never
// completes aborting itself, and naming the rank it waited for, before the watchdog fires.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/clock.h"
#include "common/errors.h"
#include "mpi/comm_deadline.h"
#include "mpi/deadline_poll.h"
#include "tests/unit/one_rank.h"
#include "train/heartbeat.h"
#include "train/watchdog.h"

namespace {

using namespace std::chrono_literals;

constexpr int kCollectiveAbortedExit = 43;
constexpr int kTooLateExit = 44;

TEST(CommDeadline, IsAShareOfTheWatchdogsTimeoutWithItsSetUpAllowance) {
  tp::CommDeadline deadline(3.0);
  EXPECT_TRUE(deadline.in_set_up());
  EXPECT_DOUBLE_EQ(deadline.seconds(), 24.0);
  // The watchdog gives set-up ten times its timeout: the collective's set-up waits are shorter.
  EXPECT_LT(deadline.seconds(), 3.0 * tp::CommDeadline::kSetUpFactor);
  deadline.end_set_up();
  EXPECT_DOUBLE_EQ(deadline.seconds(), 2.4);
  deadline.set_watchdog_timeout(30.0);
  EXPECT_DOUBLE_EQ(deadline.seconds(), 24.0);
}

// The watchdog counts from the rank's last heartbeat; so does a wait, not from its own start:
// time spent before the wait (a slow set-up step, the device's compute) is counted once.
TEST(CommDeadline, AWaitCountsFromTheLastHeartbeatNotItsOwnStart) {
  tp::CommDeadline deadline(3.0);
  deadline.end_set_up();
  const double now = tp::steady_seconds();
  EXPECT_FALSE(deadline.passed(now)) << "nothing beats (a sweep): counted from the wait's start";
  EXPECT_TRUE(deadline.passed(now - 2.5));
  deadline.mark_progress(now - 2.5);
  EXPECT_TRUE(deadline.passed(now)) << "the beat 2.5 s ago started the count";
  deadline.mark_progress(now);
  EXPECT_FALSE(deadline.passed(now - 100.0));
}

// A beat marks progress on the deadline its watchdog shares.
TEST(CommDeadline, HeartbeatsRestartTheWatchdogsDeadline) {
  const std::string dir = tp::test::fresh_dir("CommDeadlineBeats");
  tp::Heartbeat me(dir, 0, "node-a");
  tp::Watchdog watchdog(me, 1, 3.0, 1);
  const auto deadline = watchdog.comm_deadline();
  watchdog.end_set_up();
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(deadline->passed(0.0)) << "the watchdog's creation counted as progress";
  me.beat(1, "comm");
  EXPECT_FALSE(deadline->passed(0.0));
  EXPECT_DOUBLE_EQ(deadline->seconds(), 2.4);
  me.beat(1, "done");
}

TEST(CommDeadline, PollReturnsWhenDoneAndCallsExpiredOtherwise) {
  int asked = 0;
  bool expired = false;
  tp::poll_until_deadline([&] { return ++asked == 3; }, [] { return false; },
                          [&] { expired = true; }, 0us);
  EXPECT_EQ(asked, 3);
  EXPECT_FALSE(expired);
  int polls = 0;
  EXPECT_THROW(tp::poll_until_deadline([] { return false; }, [&] { return ++polls > 5; },
                                       [] { throw tp::RuntimeError("expired"); }, 1ms),
               tp::RuntimeError);
  EXPECT_EQ(polls, 6);
}

// In auto mode the watchdog starts at 600 s and learns 30 s (the floor) from short warm-up steps;
// the collective's deadline follows it instead of keeping its own 600 s.
TEST(CommDeadline, FollowsTheTimeoutTheWatchdogLearns) {
  const std::string dir = tp::test::fresh_dir("CommDeadlineLearns");
  tp::Heartbeat me(dir, 0, "node-a");
  tp::Watchdog watchdog(me, 1, 0.0, 1);
  const auto deadline = watchdog.comm_deadline();
  EXPECT_DOUBLE_EQ(deadline->watchdog_timeout(), tp::kWatchdogUntilWarmedUpS);
  for (int64_t step = 1; step <= 3; ++step) {
    me.beat(step, "compute");
    std::this_thread::sleep_for(150ms);  // several watchdog ticks see each step
  }
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (deadline->watchdog_timeout() != 30.0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(20ms);
  EXPECT_DOUBLE_EQ(deadline->watchdog_timeout(), 30.0);
  EXPECT_DOUBLE_EQ(deadline->seconds(), 240.0) << "still in set-up";
  watchdog.end_set_up();
  EXPECT_DOUBLE_EQ(deadline->seconds(), 24.0);
  me.beat(3, "done");
}

// Rank 0 waits in step 5's collective, which never completes; rank 1 stopped in compute. The
// collective's deadline passes first: it names rank 1 in abort.json, and has done so before the
// watchdog's 5 s have passed, so the abort is the collective's and not the watchdog's exit 3.
[[noreturn]] void collective_never_completes(const std::string& dir) {
  tp::Heartbeat me(dir, 0, "node-a"), stopped(dir, 1, "node-b");
  stopped.beat(5, "compute");
  tp::Watchdog watchdog(me, 2, 5.0, 1);
  watchdog.end_set_up();
  const auto deadline = watchdog.comm_deadline();
  const auto name_missing = tp::missing_rank_namer(dir, 0, 2, deadline);
  me.beat(5, "comm");
  const double started = tp::steady_seconds();
  tp::poll_until_deadline(
      [] { return false; }, [&] { return deadline->passed(started); },
      [&] {
        const std::string summary = name_missing("allreduce did not complete");
        // The watchdog counts from the same beat: its limit must not have passed yet.
        const double waited = tp::steady_seconds() - me.last_beat_steady_s();
        if (waited >= deadline->watchdog_timeout()) {
          std::fprintf(stderr, "named only after %.2f s, past the watchdog's limit\n", waited);
          std::_Exit(kTooLateExit);
        }
        std::fprintf(stderr, "collective aborted itself: %s\n", summary.c_str());
        std::fflush(stderr);
        std::_Exit(kCollectiveAbortedExit);
      },
      1ms);
  std::_Exit(0);
}

TEST(CommDeadline, ACollectiveThatNeverCompletesAbortsBeforeTheWatchdogAndNamesTheMissingRank) {
  const std::string dir = tp::test::fresh_dir("CommDeadlineNeverCompletes");
  EXPECT_EXIT(collective_never_completes(dir), ::testing::ExitedWithCode(kCollectiveAbortedExit),
              "collective aborted itself: did not arrive: rank 1 on node-b \\(last in step 5 "
              "compute");
  std::ifstream in(dir + "/abort.json");
  ASSERT_TRUE(in.good()) << "no abort.json in " << dir;
  const nlohmann::json record = nlohmann::json::parse(in);
  EXPECT_EQ(record["reason"], "allreduce did not complete");
  ASSERT_EQ(record["missing"].size(), 1u) << record;
  EXPECT_EQ(record["missing"][0]["rank"], 1);
}

}  // namespace
