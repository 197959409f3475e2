#pragma once
// The step watchdog: a thread per rank that watches this rank's own heartbeat. When it has not
// moved for the timeout, the ranks whose heartbeats are behind this one's are the ones that did
// not arrive; the watchdog writes abort.json naming them (with their hosts) and ends the process
// with exit 3, which makes the launcher tear the job down. It covers every backend: a rank stuck
// in a collective waits for a rank that stopped, and its heartbeat stops with it.
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "train/heartbeat.h"

namespace tp {

// The timeout when watchdog.timeout_s is 0 (auto): generous until the warm-up steps have shown
// how long a step takes, then 25 times the slowest warm-up step, never below 30 s.
double auto_watchdog_timeout(double slowest_warmup_step_s);
// The auto timeout until the warm-up steps have shown how long a step takes.
inline constexpr double kWatchdogUntilWarmedUpS = 600.0;

class Watchdog {
 public:
  // `timeout_s` 0: auto. `warmup_steps`: how many steps the auto timeout learns from.
  Watchdog(const Heartbeat& heartbeat, int world_size, double timeout_s, int64_t warmup_steps);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  void watch();
  [[noreturn]] void abort_job(double stalled_s);

  const Heartbeat& heartbeat_;
  int world_size_;
  bool automatic_;
  int64_t warmup_steps_;
  std::atomic<double> timeout_s_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tp
