// Aborts bounded by a grace period (mpi/comm_abort.h), with a communicator whose abort blocks.
#include <gtest/gtest.h>

#include <atomic>
#include <future>

#include "mpi/comm_abort.h"
#include "train/watchdog.h"

namespace {

// An abort that blocks until the test lets it go, as an ncclCommAbort stuck in the network.
struct BlockingAbort {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> entered{false};
  std::function<void()> call() {
    return [this] {
      entered = true;
      released.wait();
    };
  }
};

TEST(CommAbort, AnAbortThatReturnsIsWaitedFor) {
  std::atomic<bool> ran{false};
  EXPECT_TRUE(tp::run_within([&] { ran = true; }, 60.0));
  EXPECT_TRUE(ran);
}

TEST(CommAbort, AnAbortThatBlocksIsGivenUpOnAfterItsGrace) {
  BlockingAbort blocking;
  EXPECT_FALSE(tp::run_within(blocking.call(), 0.2));
  EXPECT_TRUE(blocking.entered);
  blocking.release.set_value();  // the detached thread ends before the test's objects go
}

TEST(CommAbort, TheRegistryAbortsEveryCommunicatorAndCountsTheOnesThatHang) {
  tp::CommAborts aborts;
  BlockingAbort blocking;
  std::atomic<int> returned{0};
  aborts.add([&] { ++returned; });
  aborts.add(blocking.call());
  const int removed = aborts.add([&] { ADD_FAILURE() << "a removed communicator was aborted"; });
  aborts.add([&] { ++returned; });
  aborts.remove(removed);
  const tp::CommAborts::Outcome outcome = aborts.abort_all_within(0.3);
  blocking.release.set_value();
  // The blocked abort spends the grace; the one after it gets none left and is counted stuck.
  EXPECT_EQ(outcome.returned, 1);
  EXPECT_EQ(outcome.stuck, 2);
  EXPECT_EQ(returned.load(), 1);
  EXPECT_NE(tp::abort_outcome_text(outcome, 0.3).find("2 abort(s) still running after 0.3 s"),
            std::string::npos);
  // Each communicator is aborted once: a second call finds none.
  const tp::CommAborts::Outcome again = aborts.abort_all_within(0.3);
  EXPECT_EQ(again.returned + again.stuck, 0);
}

}  // namespace
