#pragma once
// Aborting a communicator within a grace period (docs/drills.md, "Bounded abort"). ncclCommAbort
// can itself hang (a proxy thread stuck in the network, a device that no longer answers); a rank
// that waits on it forever holds its peers' connections and never reports. So every abort runs on
// a thread of its own and is waited for at most `grace` seconds; the caller then ends the process
// whether or not it returned. Header-only: the program and the GPU library both use it, and one
// registry, made by the program, is handed to the library.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace tp {

// watchdog.abort_grace_s's default.
inline constexpr double kDefaultAbortGraceS = 30.0;

// Runs `work` on a thread of its own and waits for it up to `grace_s`. True when it returned in
// time; false leaves it running, detached (the caller is about to end the process).
inline bool run_within(std::function<void()> work, double grace_s) {
  struct Shared {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
  };
  auto shared = std::make_shared<Shared>();
  std::thread([shared, work = std::move(work)] {
    work();
    std::lock_guard<std::mutex> guard(shared->mutex);
    shared->done = true;
    shared->done_cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(shared->mutex);
  return shared->done_cv.wait_for(lock, std::chrono::duration<double>(grace_s),
                                  [&] { return shared->done; });
}

// The communicators of this process that an abort must release: each registers the call that
// aborts it and removes it when it is gone.
class CommAborts {
 public:
  struct Outcome {
    int returned = 0;  // aborts that returned within the grace period
    int stuck = 0;     // aborts still running when it ended
  };
  int add(std::function<void()> abort) {
    std::lock_guard<std::mutex> guard(mutex_);
    aborts_.emplace(next_, std::move(abort));
    return next_++;
  }
  void remove(int id) {
    std::lock_guard<std::mutex> guard(mutex_);
    aborts_.erase(id);
  }
  // Aborts every registered communicator, one after another, each within what is left of
  // `grace_s`; the ones that did not return are counted, not waited for.
  Outcome abort_all_within(double grace_s) {
    std::map<int, std::function<void()>> aborts;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      aborts.swap(aborts_);
    }
    Outcome outcome;
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
    for (auto& [id, abort] : aborts) {
      const double left =
          std::chrono::duration<double>(until - std::chrono::steady_clock::now()).count();
      if (left > 0 && run_within(std::move(abort), left))
        ++outcome.returned;
      else
        ++outcome.stuck;
    }
    return outcome;
  }

 private:
  std::mutex mutex_;
  std::map<int, std::function<void()>> aborts_;
  int next_ = 0;
};

// This process's registry (mpi/comm_abort.cpp): the watchdog aborts what is in it.
std::shared_ptr<CommAborts> process_comm_aborts();

}  // namespace tp
