// The watchdog thread with real heartbeats and short timeouts. It ends the process when it fires,
// so each case runs in a death test's child; the parent then reads the abort record the child
// left. Margins are wide on purpose: only "fired" and "did not fire" are asserted, never how fast.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/errors.h"
#include "tests/unit/one_rank.h"
#include "train/heartbeat.h"
#include "train/watchdog.h"

namespace {

using namespace std::chrono_literals;

// Far beyond any timeout below: reaching it means the watchdog did not fire.
constexpr auto kNeverFired = 60s;
constexpr int kNotFiredExit = 42;

// Rank 0 waits in step 5's collective; rank 1 (on another host) stopped in step 5's compute and
// never arrives. Rank 0's own heartbeat stops moving.
[[noreturn]] void rank_1_stops_in_compute(const std::string& dir) {
  tp::Heartbeat me(dir, 0, "node-a"), stopped(dir, 1, "node-b");
  stopped.beat(5, "compute");
  me.beat(5, "comm");
  tp::Watchdog watchdog(me, 2, 0.5, 1);
  std::this_thread::sleep_for(kNeverFired);
  std::_Exit(kNotFiredExit);
}

// Ranks 0 and 1 wait in step 3's collective; rank 2 never started.
[[noreturn]] void rank_2_never_beats(const std::string& dir) {
  tp::Heartbeat me(dir, 0, "node-a"), peer(dir, 1, "node-a");
  me.beat(3, "comm");
  peer.beat(3, "comm");
  tp::Watchdog watchdog(me, 3, 0.5, 1);
  std::this_thread::sleep_for(kNeverFired);
  std::_Exit(kNotFiredExit);
}

// Steps of 20 ms for 3 s under a 1 s timeout; the watchdog stops with its owner.
[[noreturn]] void steps_keep_moving(const std::string& dir) {
  tp::Heartbeat me(dir, 0, "node-a");
  {
    tp::Watchdog watchdog(me, 1, 1.0, 1);
    static const char* const kPhases[] = {"data", "compute", "comm", "optimizer"};
    const auto until = std::chrono::steady_clock::now() + 3s;
    for (int64_t step = 1; std::chrono::steady_clock::now() < until; ++step)
      for (const char* phase : kPhases) {
        me.beat(step, phase);
        std::this_thread::sleep_for(5ms);
      }
  }
  std::_Exit(kNotFiredExit);
}

class Watchdog : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = tp::test::fresh_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  nlohmann::json abort_record() const {
    std::ifstream in(dir + "/abort.json");
    if (!in) {
      ADD_FAILURE() << "the watchdog left no abort.json in " << dir;
      return nlohmann::json::object();
    }
    return nlohmann::json::parse(in);
  }
  std::string dir;
};

// Rank 0's own heartbeat stops moving, so its watchdog fires and names rank 1, which is behind.
TEST_F(Watchdog, FiresWhenThisRankStopsAndNamesTheRankBehind) {
  EXPECT_EXIT(rank_1_stops_in_compute(dir), ::testing::ExitedWithCode(tp::kExitRuntime),
              "watchdog on rank 0 \\(node-a\\), in step 5 comm: no progress for .* s "
              "\\(watchdog.timeout_s 0.5\\); did not arrive: rank 1 on node-b \\(last in step 5 "
              "compute\\)");
  const nlohmann::json record = abort_record();
  EXPECT_EQ(record["detected_by"]["rank"], 0);
  EXPECT_EQ(record["detected_by"]["host"], "node-a");
  EXPECT_EQ(record["detected_by"]["step"], 5);
  EXPECT_EQ(record["detected_by"]["phase"], "comm");
  ASSERT_EQ(record["missing"].size(), 1u);
  EXPECT_EQ(record["missing"][0]["rank"], 1);
  EXPECT_EQ(record["missing"][0]["host"], "node-b");
  EXPECT_EQ(record["missing"][0]["last_step"], 5);
  EXPECT_EQ(record["missing"][0]["last_phase"], "compute");
}

// A rank that never wrote a heartbeat at all is named as such.
TEST_F(Watchdog, NamesARankWithoutAHeartbeat) {
  EXPECT_EXIT(rank_2_never_beats(dir), ::testing::ExitedWithCode(tp::kExitRuntime),
              "did not arrive: rank 2 \\(no heartbeat\\)");
  const nlohmann::json record = abort_record();
  ASSERT_EQ(record["missing"].size(), 1u);
  EXPECT_EQ(record["missing"][0]["rank"], 2);
  EXPECT_TRUE(record["missing"][0]["host"].is_null());
}

// Steps that keep moving, each far shorter than the timeout: the watchdog never fires.
TEST_F(Watchdog, DoesNotFireWhileHeartbeatsMove) {
  EXPECT_EXIT(steps_keep_moving(dir), ::testing::ExitedWithCode(kNotFiredExit), "");
  EXPECT_FALSE(std::ifstream(dir + "/abort.json").good()) << "no abort record";
}

}  // namespace
