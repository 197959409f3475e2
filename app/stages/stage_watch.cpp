#include "app/stages/stage_watch.h"

#include <cstring>

#include "app/stages/train_setup.h"
#include "train/heartbeat.h"
#include "train/watchdog.h"

namespace tp {
namespace {

// The innermost stage watch of this process (stages run on the main thread, one at a time).
StageWatch* active = nullptr;

}  // namespace

StageWatch::StageWatch(const TrainConfig& cfg, const std::string& report_path, const World& world,
                       const char* phase)
    : phase_(phase), outer_(active) {
  heartbeat_ = prepare_outputs(cfg, report_path, world);
  cleanup_ = std::make_unique<HeartbeatCleanup>(*heartbeat_, world, cfg.watchdog_dir.empty());
  // Until its first row or round, a sweep sets up (backends, topology) with set-up's allowance;
  // the preflight and the restore have it throughout.
  const bool whole_stage_slow =
      std::strcmp(phase, "preflight") == 0 || std::strcmp(phase, "restore") == 0;
  heartbeat_->beat(0, whole_stage_slow ? phase : "start");
  // A fixed timeout: without warm-up steps there is nothing to learn one from.
  const double timeout =
      cfg.watchdog_timeout_s > 0 ? cfg.watchdog_timeout_s : kWatchdogUntilWarmedUpS;
  watchdog_ =
      std::make_unique<Watchdog>(*heartbeat_, world.size, timeout, 0, cfg.watchdog_publish_s);
  watchdog_->set_abort_grace(cfg.watchdog_abort_grace_s);
  active = this;
}

StageWatch::~StageWatch() {
  active = outer_;
  watchdog_.reset();  // its last tick comes before the heartbeat's files go
}

void StageWatch::end() {
  watchdog_.reset();
  cleanup_->at_end();
}

void stage_beat(int64_t point) {
  if (active) active->heartbeat_->beat(point, active->phase_);
}

}  // namespace tp
