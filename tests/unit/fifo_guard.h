#pragma once
// Runs a call that must not block on a FIFO, for at most a few seconds: a regression then fails
// its test instead of hanging it. The call runs on a thread of its own; when it is still running
// at the limit, a writer opens the FIFO, which releases a reader blocked in open(2), and the
// outcome says it blocked.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/errors.h"

namespace tp::test {

struct FifoOutcome {
  bool blocked = false;      // still running at the limit
  bool usage_error = false;  // ended with a UsageError (exit 2)
  std::string message;       // what it threw; empty when it returned
};

inline FifoOutcome call_beside_fifo(const std::string& fifo, const std::function<void()>& call,
                                    std::chrono::seconds limit = std::chrono::seconds(5)) {
  struct Shared {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
    FifoOutcome outcome;
  };
  auto shared = std::make_shared<Shared>();
  std::thread runner([shared, call] {
    FifoOutcome outcome;
    try {
      call();
    } catch (const UsageError& e) {
      outcome.usage_error = true;
      outcome.message = e.what();
    } catch (const std::exception& e) {
      outcome.message = e.what();
    }
    std::lock_guard<std::mutex> guard(shared->mutex);
    shared->outcome = outcome;
    shared->done = true;
    shared->done_cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(shared->mutex);
  if (shared->done_cv.wait_for(lock, limit, [&] { return shared->done; })) {
    lock.unlock();
    runner.join();
    return shared->outcome;
  }
  // Blocked: release it (a writer's open lets a blocked reader's open return; closing it gives
  // end of file), and report the block whatever the call does next.
  lock.unlock();
  const int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
  if (writer >= 0) ::close(writer);
  lock.lock();
  const bool released = shared->done_cv.wait_for(lock, limit, [&] { return shared->done; });
  lock.unlock();
  if (released)
    runner.join();
  else
    runner.detach();  // still stuck: the process ends it when it exits
  FifoOutcome outcome;
  outcome.blocked = true;
  return outcome;
}

// Replaces `path` with a FIFO (nobody writes to it).
inline void make_fifo_at(const std::string& path) {
  ::unlink(path.c_str());
  if (::mkfifo(path.c_str(), 0644) != 0) throw std::runtime_error("mkfifo " + path);
}

}  // namespace tp::test
