#pragma once
// How long a collective's waits may last before the collective aborts itself (README, "GPUs:
// CUDA and NCCL"). It is a share of the watchdog's timeout, shared with the watchdog as it learns
// it, and counted from the same moment, this rank's last heartbeat: so the collective's own abort,
// which names the ranks it waited for and releases the communicator (ncclCommAbort), runs before
// the watchdog ends the process. Header-only: the GPU library and the program both read it.
#include <atomic>

#include "common/clock.h"

namespace tp {

class CommDeadline {
 public:
  // The share of the watchdog's timeout the waits since the last heartbeat may take; of the
  // rest, a tenth names the missing ranks (train/watchdog.h missing_rank_namer), a tenth is margin.
  static constexpr double kShare = 0.8;
  // The allowance the watchdog gives set-up (its "start" phase): communicator creation and the
  // collective self-check, whose first collectives open NCCL's connections lazily, get it too.
  static constexpr double kSetUpFactor = 10.0;

  explicit CommDeadline(double watchdog_timeout_s) : watchdog_s_(watchdog_timeout_s) {}

  // The watchdog learned its timeout from the warm-up steps.
  void set_watchdog_timeout(double seconds) { watchdog_s_.store(seconds); }
  double watchdog_timeout() const { return watchdog_s_.load(); }
  // Training begins: the set-up allowance ends, as the watchdog's does when step 1 starts.
  void end_set_up() { set_up_.store(false); }
  bool in_set_up() const { return set_up_.load(); }
  // The rank's heartbeat moved (train/heartbeat.h): the watchdog's count starts again here.
  void mark_progress(double steady_s) { progress_s_.store(steady_s); }

  // Seconds the waits may take now, counted from the last heartbeat.
  double seconds() const {
    return kShare * watchdog_s_.load() * (set_up_.load() ? kSetUpFactor : 1.0);
  }
  // True once a wait that began at `wait_start_s` (steady_seconds) has run out: counted from the
  // last heartbeat, which came before it, or from its own start where nothing beats (a sweep).
  bool passed(double wait_start_s) const {
    const double progress = progress_s_.load();
    return steady_seconds() - (progress >= 0 ? progress : wait_start_s) > seconds();
  }

 private:
  std::atomic<double> watchdog_s_;
  std::atomic<bool> set_up_{true};
  std::atomic<double> progress_s_{-1.0};
};

}  // namespace tp
