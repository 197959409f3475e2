#pragma once
// How long one wait of a collective may last before the collective aborts itself (README, "GPUs:
// CUDA and NCCL"). It is a share of the watchdog's timeout, shared with the watchdog as it learns
// it, and strictly shorter: the collective's own abort, which names the ranks it waited for and
// releases the communicator (ncclCommAbort), then runs before the watchdog ends the process.
// Header-only: the GPU library and the program both read it.
#include <atomic>

namespace tp {

class CommDeadline {
 public:
  // The share of the watchdog's timeout a wait may take. A wait begins at a heartbeat (the step
  // loop beats "comm" before every collective), where the watchdog's own count begins too; of the
  // rest, a tenth names the missing ranks (app/backend_selection.cpp) and a tenth is margin.
  static constexpr double kShare = 0.8;
  // The allowance the watchdog gives set-up. The communicator's creation and its first
  // collective, which opens the connections lazily, get it as well.
  static constexpr double kSetUpFactor = 10.0;

  explicit CommDeadline(double watchdog_timeout_s) : watchdog_s_(watchdog_timeout_s) {}

  // The watchdog learned its timeout from the warm-up steps.
  void set_watchdog_timeout(double seconds) { watchdog_s_.store(seconds); }
  double watchdog_timeout() const { return watchdog_s_.load(); }
  // Seconds a wait may last now; `set_up`: creating the communicator or its first collective.
  double seconds(bool set_up) const {
    return kShare * watchdog_s_.load() * (set_up ? kSetUpFactor : 1.0);
  }

 private:
  std::atomic<double> watchdog_s_;
};

}  // namespace tp
