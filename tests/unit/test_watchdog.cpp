// The watchdog thread with real heartbeats and short timeouts. It ends the process when it fires,
// so each case runs in a death test's child; the parent then reads the abort record the child
// left. Margins are wide on purpose: only "fired" and "did not fire" are asserted, never how fast.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

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

// The watchdog threads of the other ranks: their counters move while they wait; a stopped rank's
// does not.
class OtherWatchdogs {
 public:
  explicit OtherWatchdogs(std::vector<tp::Heartbeat*> ranks) : ranks_(std::move(ranks)) {
    for (tp::Heartbeat* rank : ranks_) rank->tick();
    thread_ = std::thread([this] {
      for (;;) {
        std::this_thread::sleep_for(20ms);
        for (tp::Heartbeat* rank : ranks_) rank->tick();
      }
    });
    thread_.detach();  // the death test's child ends with the watchdog's _Exit
  }

 private:
  std::vector<tp::Heartbeat*> ranks_;
  std::thread thread_;
};

// Rank 3 stopped in step 5's checkpoint; rank 0, alive, waits there for its checksum, while
// ranks 1 and 2 went on and wait in step 6's collective. Heartbeats alone put rank 0 behind too.
[[noreturn]] void rank_3_stops_in_the_checkpoint(const std::string& dir) {
  tp::Heartbeat r0(dir, 0, "node-a"), me(dir, 1, "node-b"), r2(dir, 2, "node-c"),
      stopped(dir, 3, "node-d");
  r0.beat(5, "checkpoint");
  stopped.beat(5, "checkpoint");
  stopped.tick();  // its watchdog counted, then stopped with it
  r2.beat(6, "comm");
  me.beat(6, "comm");
  OtherWatchdogs others({&r0, &r2});
  tp::Watchdog watchdog(me, 4, 0.5, 1);
  std::this_thread::sleep_for(kNeverFired);
  std::_Exit(kNotFiredExit);
}

// Rank 2 stopped on entering step 5's comm: every heartbeat says step 5 comm.
[[noreturn]] void rank_2_stops_in_comm(const std::string& dir) {
  tp::Heartbeat me(dir, 0, "node-a"), r1(dir, 1, "node-a"), stopped(dir, 2, "node-b"),
      r3(dir, 3, "node-b");
  for (tp::Heartbeat* h : {&me, &r1, &stopped, &r3}) h->beat(5, "comm");
  stopped.tick();
  OtherWatchdogs others({&r1, &r3});
  tp::Watchdog watchdog(me, 4, 0.5, 1);
  std::this_thread::sleep_for(kNeverFired);
  std::_Exit(kNotFiredExit);
}

// This rank's step hangs in compute while its watchdog runs; the others wait in comm.
[[noreturn]] void this_rank_hangs(const std::string& dir) {
  tp::Heartbeat me(dir, 0, "node-a"), r1(dir, 1, "node-b");
  r1.beat(5, "comm");
  me.beat(5, "compute");
  OtherWatchdogs others({&r1});
  tp::Watchdog watchdog(me, 2, 0.5, 1);
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

// Rank 0 is alive and behind the furthest rank; rank 3's counter stopped: only rank 3 is named.
TEST_F(Watchdog, NamesTheStoppedRankNotTheLiveRankWaitingBehindIt) {
  EXPECT_EXIT(rank_3_stops_in_the_checkpoint(dir), ::testing::ExitedWithCode(tp::kExitRuntime),
              "watchdog on rank 1 \\(node-b\\), in step 6 comm: .*; did not arrive: rank 3 on "
              "node-d \\(last in step 5 checkpoint; stopped or dead\\) \\(abort.json");
  const nlohmann::json record = abort_record();
  ASSERT_EQ(record["missing"].size(), 1u) << record;
  EXPECT_EQ(record["missing"][0]["rank"], 3);
  EXPECT_EQ(record["missing"][0]["why"], "stopped");
  EXPECT_EQ(record["furthest"]["step"], 6);
}

TEST_F(Watchdog, NamesARankStoppedInCommWhereEveryHeartbeatIsAlike) {
  EXPECT_EXIT(rank_2_stops_in_comm(dir), ::testing::ExitedWithCode(tp::kExitRuntime),
              "did not arrive: rank 2 on node-b \\(last in step 5 comm; stopped or dead\\) "
              "\\(abort.json");
  const nlohmann::json record = abort_record();
  ASSERT_EQ(record["missing"].size(), 1u) << record;
  EXPECT_EQ(record["missing"][0]["rank"], 2);
}

// The hung rank's own watchdog fires first and names it: it is behind the furthest rank.
TEST_F(Watchdog, AHungRankNamesItself) {
  EXPECT_EXIT(this_rank_hangs(dir), ::testing::ExitedWithCode(tp::kExitRuntime),
              "watchdog on rank 0 \\(node-a\\), in step 5 compute: .*; did not arrive: rank 0 on "
              "node-a \\(last in step 5 compute\\) \\(abort.json");
  const nlohmann::json record = abort_record();
  ASSERT_EQ(record["missing"].size(), 1u) << record;
  EXPECT_EQ(record["missing"][0]["why"], "behind");
}

// A run removes its heartbeat at its end (finish) while its watchdog still ticks, until the
// watchdog is destroyed after it. In this process, not a death test's child: ThreadSanitizer
// (scripts/tsan.sh) fails the test binary on a race between the two threads.
TEST_F(Watchdog, TheRunMayEndBeforeItsWatchdogDoes) {
  tp::Heartbeat me(dir, 0, "node-a");
  {
    tp::Watchdog watchdog(me, 1, 5.0, 1);
    me.beat(1, "done");
    std::this_thread::sleep_for(120ms);
    me.finish();
    std::this_thread::sleep_for(120ms);
  }
  EXPECT_FALSE(std::filesystem::exists(tp::node_beats_path(dir, 0)));
}

// Steps that keep moving, each far shorter than the timeout: the watchdog never fires.
TEST_F(Watchdog, DoesNotFireWhileHeartbeatsMove) {
  EXPECT_EXIT(steps_keep_moving(dir), ::testing::ExitedWithCode(kNotFiredExit), "");
  EXPECT_FALSE(std::ifstream(dir + "/abort.json").good()) << "no abort record";
}

}  // namespace
