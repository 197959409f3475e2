#include "train/watchdog.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "common/clock.h"
#include "common/errors.h"

namespace tp {
namespace {

constexpr double kFloorS = 30.0;

// A checkpoint (and the set-up before step 1) may take far longer than a step.
bool slow_phase(const std::string& phase) {
  return phase == "checkpoint" || phase == "start" || phase == "done";
}

}  // namespace

double auto_watchdog_timeout(double slowest_warmup_step_s) {
  return std::max(kFloorS, 25.0 * slowest_warmup_step_s);
}

Watchdog::Watchdog(const Heartbeat& heartbeat, int world_size, double timeout_s,
                   int64_t warmup_steps)
    : heartbeat_(heartbeat),
      world_size_(world_size),
      automatic_(timeout_s <= 0),
      warmup_steps_(std::max<int64_t>(1, warmup_steps)),
      timeout_s_(timeout_s > 0 ? timeout_s : kWatchdogUntilWarmedUpS) {
  thread_ = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Watchdog::watch() {
  int64_t last_step = -1, steps_seen = 0;
  double step_started = steady_seconds(), slowest_step = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, std::chrono::milliseconds(50), [this] { return stopping_; })) {
    const HeartbeatRecord me = heartbeat_.latest();
    const double now = steady_seconds();
    // Learn the step time from the steps this process runs first (a resumed run learns anew):
    // every change of step seen, whatever the phase it is seen in.
    if (me.phase != "start" && me.phase != "done" && me.step != last_step) {
      if (last_step >= 0) slowest_step = std::max(slowest_step, now - step_started);
      last_step = me.step;
      step_started = now;
      if (automatic_ && ++steps_seen == warmup_steps_ + 1)
        timeout_s_.store(auto_watchdog_timeout(slowest_step));
    }
    const double stalled = now - heartbeat_.last_beat_steady_s();
    const double limit = timeout_s_.load() * (slow_phase(me.phase) ? 10.0 : 1.0);
    if (stalled > limit) abort_job(stalled);
  }
}

void Watchdog::abort_job(double stalled_s) {
  HeartbeatRecord me = heartbeat_.latest();
  std::vector<HeartbeatRecord> all = Heartbeat::read_all(heartbeat_.dir(), world_size_);
  std::vector<HeartbeatRecord> missing = Heartbeat::behind(all, me);
  if (missing.empty()) {
    // Nobody is behind this rank: it is likely the one that stopped. The ranks that are ahead
    // name it; give them the time to, and act only if they have not.
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(10.0, timeout_s_.load())));
    all = Heartbeat::read_all(heartbeat_.dir(), world_size_);
    missing = Heartbeat::behind(all, me);
    // A rank ahead has named the culprit already: its record stands.
    std::error_code ec;
    if (missing.empty() && std::filesystem::exists(heartbeat_.dir() + "/abort.json", ec)) {
      std::fprintf(stderr,
                   "trainproof: watchdog on rank %d (%s): no progress; abort.json names "
                   "the ranks that did not arrive\n",
                   me.rank, me.host.c_str());
      std::_Exit(kExitRuntime);
    }
  }
  char what[160];
  std::snprintf(what, sizeof what, "no progress for %.1f s (watchdog.timeout_s %.1f)", stalled_s,
                timeout_s_.load());
  const std::string summary = write_abort_record(heartbeat_.dir(), what, me, missing);
  std::fprintf(stderr,
               "trainproof: watchdog on rank %d (%s), in step %lld %s: %s; %s; aborting the job\n",
               me.rank, me.host.c_str(), static_cast<long long>(me.step), me.phase.c_str(), what,
               summary.c_str());
  std::fflush(stderr);
  // Not MPI_Abort: this thread may not call MPI, and the main thread is stuck inside it. The
  // launcher ends the job when one of its processes exits without finalising.
  std::_Exit(kExitRuntime);
}

}  // namespace tp
