// Aborts bounded by a grace period (mpi/comm_abort.h), with a communicator whose abort blocks.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include "mpi/comm_abort.h"
#include "train/watchdog.h"

namespace {

// An abort that blocks until the test lets it go, as an ncclCommAbort stuck in the network. The
// call holds its own copies: the thread it runs on may outlive the test's objects.
struct BlockingAbort {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::shared_ptr<std::atomic<bool>> entered = std::make_shared<std::atomic<bool>>(false);
  std::function<void()> call() {
    return [released = released, entered = entered] {
      *entered = true;
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
  // It started (a slow machine may take a moment to schedule it) and is still blocked.
  for (int i = 0; i < 1000 && !*blocking.entered; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(*blocking.entered);
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
  // A grace far longer than a returning abort takes, even on a loaded machine.
  const tp::CommAborts::Outcome outcome = aborts.abort_all_within(2.0);
  blocking.release.set_value();
  // The blocked abort spends the grace; the one after it gets none left and is counted stuck.
  EXPECT_EQ(outcome.returned, 1);
  EXPECT_EQ(outcome.stuck, 2);
  EXPECT_EQ(returned.load(), 1);
  EXPECT_NE(tp::abort_outcome_text(outcome, 2.0).find("2 abort(s) still running after 2.0 s"),
            std::string::npos);
  // Each communicator is aborted once: a second call finds none.
  const tp::CommAborts::Outcome again = aborts.abort_all_within(0.3);
  EXPECT_EQ(again.returned + again.stuck, 0);
}

}  // namespace
