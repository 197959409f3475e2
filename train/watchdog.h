#pragma once
// The step watchdog: a thread per rank that watches this rank's own heartbeat and advances the
// rank's liveness counter. When the heartbeat has not moved for the timeout, it reads every rank's
// heartbeat twice, a liveness window apart, and names the ranks the job waits for
// (train/culprits.h): the same rule, on the same evidence, whichever rank fires first. It writes
// abort.json naming them (with their hosts), aborts this process's NCCL communicators, each within
// watchdog.abort_grace_s, and ends the process with exit 3, which makes the launcher tear the job
// down. It covers every backend: a rank stuck in a collective waits for a
// rank that stopped, and its heartbeat stops with it.
#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "mpi/comm_abort.h"
#include "mpi/comm_deadline.h"
#include "train/culprits.h"
#include "train/heartbeat.h"

namespace tp {

// The timeout when watchdog.timeout_s is 0 (auto): generous until the warm-up steps have shown
// how long a step takes, then 25 times the slowest warm-up step, never below 30 s.
double auto_watchdog_timeout(double slowest_warmup_step_s);
// The auto timeout until the warm-up steps have shown how long a step takes.
inline constexpr double kWatchdogUntilWarmedUpS = 600.0;

// How often a node's heartbeat file may be rewritten under a watchdog of `timeout_s`: every
// `publish_s` (watchdog.publish_s, 1 s by default), or more often where a third of the shortest
// liveness window is less, so every window spans several publishes, a takeover included.
double publish_interval_s(double timeout_s, double publish_s = 1.0);

// How far apart the two reads of the heartbeats are: many ticks of a live watchdog (every 50 ms),
// and short beside the timeout.
double liveness_window_s(double timeout_s);

struct Evidence {
  std::vector<HeartbeatRecord> latest;  // the second read, by rank
  Verdict verdict;
};
// Reads every rank's heartbeat in `dir` twice, `window_s` apart, and names the culprits.
// `while_waiting` runs every 50 ms in between: a watchdog keeps its own counter moving.
Evidence gather_evidence(const std::string& dir, int world_size, double window_s,
                         const std::function<void()>& while_waiting = nullptr);

// What a collective calls when its deadline (mpi/comm_deadline.h) passes: the watchdog's evidence
// and rule (every rank's heartbeat in `dir`, read twice), written to abort.json as the watchdog
// would, with the summary returned. The two reads fit in the tenth of the watchdog's timeout the
// deadline leaves, so the collective's abort finishes before the watchdog would fire.
std::function<std::string(const std::string& what)> missing_rank_namer(
    const std::string& dir, int rank, int world_size, std::shared_ptr<const CommDeadline> deadline);

// The watchdog's line on the aborts it ran when it fired.
std::string abort_outcome_text(const CommAborts::Outcome& outcome, double grace_s);

class Watchdog {
 public:
  // `timeout_s` 0: auto. `warmup_steps`: how many steps the auto timeout learns from.
  // `publish_s`: watchdog.publish_s (publish_interval_s).
  Watchdog(Heartbeat& heartbeat, int world_size, double timeout_s, int64_t warmup_steps,
           double publish_s = 1.0);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  // The deadline a collective's waits keep (mpi/comm_deadline.h): it follows this watchdog's
  // timeout as the timeout is learned, so the collective aborts itself first.
  std::shared_ptr<const CommDeadline> comm_deadline() const { return comm_deadline_; }
  // Set-up is over (step 1 begins): the collective's set-up allowance ends with the watchdog's.
  void end_set_up() { comm_deadline_->end_set_up(); }
  // How long each of this process's NCCL aborts may take once it fires (watchdog.abort_grace_s;
  // mpi/comm_abort.h).
  void set_abort_grace(double seconds) { abort_grace_s_.store(seconds); }

 private:
  void watch();
  [[noreturn]] void abort_job(double stalled_s);

  Heartbeat& heartbeat_;
  int world_size_;
  bool automatic_;
  int64_t warmup_steps_;
  double publish_s_;
  std::atomic<double> timeout_s_;
  std::atomic<double> abort_grace_s_{kDefaultAbortGraceS};
  std::shared_ptr<CommDeadline> comm_deadline_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tp
