#include "train/watchdog.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/clock.h"
#include "common/errors.h"

namespace tp {
namespace {

constexpr double kFloorS = 30.0;
constexpr double kTickS = 0.05;

// A checkpoint (and the set-up before step 1) may take far longer than a step.
bool slow_phase(const std::string& phase) {
  return phase == "checkpoint" || phase == "start" || phase == "done" || phase == "preflight" ||
         phase == "restore";
}

}  // namespace

std::string abort_outcome_text(const CommAborts::Outcome& outcome, double grace_s) {
  if (outcome.returned + outcome.stuck == 0) return "no communicator to abort";
  char text[160];
  std::snprintf(text, sizeof text, "%d communicator(s) aborted%s", outcome.returned,
                outcome.stuck ? "" : " in time");
  std::string line = text;
  if (outcome.stuck) {
    std::snprintf(text, sizeof text,
                  ", %d abort(s) still running after %.1f s (watchdog.abort_grace_s), left behind",
                  outcome.stuck, grace_s);
    line += text;
  }
  return line;
}

double auto_watchdog_timeout(double slowest_warmup_step_s) {
  return std::max(kFloorS, 25.0 * slowest_warmup_step_s);
}

double publish_interval_s(double timeout_s, double publish_s) {
  // The shortest window the file is read twice in (missing_rank_namer's), a third of it: a live
  // node rewrites its file in between even when it must first take over from a stopped
  // publisher (two intervals). 1 s at the default timeouts (30 s and more).
  const double shortest_window = std::min(liveness_window_s(timeout_s), 0.1 * timeout_s);
  return std::min(publish_s, shortest_window / 3);
}

double liveness_window_s(double timeout_s) {
  return std::clamp(timeout_s / 2, 1.0, 5.0);
}

Evidence gather_evidence(const std::string& dir, int world_size, double window_s,
                         const std::function<void()>& while_waiting) {
  const std::vector<HeartbeatRecord> first = Heartbeat::read_all(dir, world_size);
  const double until = steady_seconds() + window_s;
  for (double now = steady_seconds(); now < until; now = steady_seconds()) {
    if (while_waiting) while_waiting();
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(kTickS, until - now)));
  }
  Evidence evidence;
  evidence.latest = Heartbeat::read_all(dir, world_size);
  evidence.verdict = name_culprits(first, evidence.latest);
  return evidence;
}

std::function<std::string(const std::string&)> missing_rank_namer(
    const std::string& dir, int rank, int world_size,
    std::shared_ptr<const CommDeadline> deadline) {
  return [dir, rank, world_size, deadline](const std::string& what) {
    const double timeout = deadline->watchdog_timeout();
    const double window = std::min(liveness_window_s(timeout), 0.1 * timeout);
    const Evidence evidence = gather_evidence(dir, world_size, window);
    return write_abort_record(dir, what, evidence.latest[size_t(rank)], evidence.verdict);
  };
}

Watchdog::Watchdog(Heartbeat& heartbeat, int world_size, double timeout_s, int64_t warmup_steps,
                   double publish_s)
    : heartbeat_(heartbeat),
      world_size_(world_size),
      automatic_(timeout_s <= 0),
      warmup_steps_(std::max<int64_t>(1, warmup_steps)),
      publish_s_(publish_s),
      timeout_s_(timeout_s > 0 ? timeout_s : kWatchdogUntilWarmedUpS),
      comm_deadline_(std::make_shared<CommDeadline>(timeout_s_.load())) {
  heartbeat_.report_progress_to(comm_deadline_);
  heartbeat_.set_publish_interval(publish_interval_s(timeout_s_.load(), publish_s_));
  thread_ = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  heartbeat_.end_watch();
}

void Watchdog::watch() {
  int64_t last_step = -1, steps_seen = 0;
  double step_started = steady_seconds(), slowest_step = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  const auto tick = std::chrono::duration<double>(kTickS);
  while (!wake_.wait_for(lock, tick, [this] { return stopping_; })) {
    heartbeat_.tick();
    const HeartbeatRecord me = heartbeat_.latest();
    const double now = steady_seconds();
    // Learn the step time from the steps this process runs first (a resumed run learns anew):
    // every change of step seen, whatever the phase it is seen in.
    if (me.phase != "start" && me.phase != "done" && me.step != last_step) {
      if (last_step >= 0) slowest_step = std::max(slowest_step, now - step_started);
      last_step = me.step;
      step_started = now;
      if (automatic_ && ++steps_seen == warmup_steps_ + 1) {
        timeout_s_.store(auto_watchdog_timeout(slowest_step));
        comm_deadline_->set_watchdog_timeout(timeout_s_.load());
        heartbeat_.set_publish_interval(publish_interval_s(timeout_s_.load(), publish_s_));
      }
    }
    const double stalled = now - heartbeat_.last_beat_steady_s();
    const double limit =
        timeout_s_.load() * (slow_phase(me.phase) ? CommDeadline::kSetUpFactor : 1.0);
    if (stalled > limit) abort_job(stalled);
  }
}

void Watchdog::abort_job(double stalled_s) {
  const HeartbeatRecord me = heartbeat_.latest();
  const Evidence evidence =
      gather_evidence(heartbeat_.dir(), world_size_, liveness_window_s(timeout_s_.load()),
                      [this] { heartbeat_.tick(); });
  char what[160];
  std::snprintf(what, sizeof what, "no progress for %.1f s (watchdog.timeout_s %.1f)", stalled_s,
                timeout_s_.load());
  const std::string summary = write_abort_record(heartbeat_.dir(), what, me, evidence.verdict);
  // A rank that ends on purpose is not one the others wait for.
  heartbeat_.end_watch();
  // Released communicators give their peers an error instead of a silent wait; an abort that
  // hangs is left behind once its grace is spent (mpi/comm_abort.h).
  const CommAborts::Outcome aborts = process_comm_aborts()->abort_all_within(abort_grace_s_.load());
  std::fprintf(stderr,
               "trainproof: watchdog on rank %d (%s), in step %lld %s: %s; %s; %s; aborting the "
               "job\n",
               me.rank, me.host.c_str(), static_cast<long long>(me.step), me.phase.c_str(), what,
               summary.c_str(), abort_outcome_text(aborts, abort_grace_s_.load()).c_str());
  std::fflush(stderr);
  // Not MPI_Abort: this thread may not call MPI, and the main thread is stuck inside it. The
  // launcher ends the job when one of its processes exits without finalising.
  std::_Exit(kExitRuntime);
}

}  // namespace tp
