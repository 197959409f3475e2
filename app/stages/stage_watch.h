#pragma once
// The heartbeat watchdog over a stage that is not training: the topology preflight, the sweep, the
// pairwise pass and the restore. Their MPI waits have no deadline of their own, so a rank that
// stops or hangs there is found as in training: the other ranks' heartbeats stop moving, the
// first watchdog to fire names the ranks the job waits for in abort.json and ends the job with
// exit 3 (docs/drills.md, "Heartbeats"; docs/acceptance.md, "Deadlines").
//
// The stage beats once per row of the sweep and per round of the pairwise pass (stage_beat). A
// row or round may take watchdog.timeout_s (600 s when auto: no warm-up teaches these stages a
// step time); the preflight and the restore, which beat only as they start, get ten times that.
#include <memory>
#include <string>

#include "mpi/world.h"
#include "train/train_config.h"

namespace tp {

class Heartbeat;
class HeartbeatCleanup;
class Watchdog;

class StageWatch {
 public:
  // Collective: the heartbeats go where training's go (watchdog.dir, or beside `report_path`).
  // `phase` names the stage in the heartbeats and abort.json ("sweep", "pairwise", ...).
  StageWatch(const TrainConfig& config, const std::string& report_path, const World& world,
             const char* phase);
  // Collective when the stage ended normally: every rank's files go before rank 0 removes the
  // folder. Unwinding from an error, the files of ranks that did not finish stay as evidence.
  ~StageWatch();
  StageWatch(const StageWatch&) = delete;
  StageWatch& operator=(const StageWatch&) = delete;
  void end();

 private:
  friend void stage_beat(int64_t point);
  const char* phase_;
  std::unique_ptr<Heartbeat> heartbeat_;
  std::unique_ptr<HeartbeatCleanup> cleanup_;
  std::unique_ptr<Watchdog> watchdog_;
  StageWatch* outer_;
};

// The stage's progress on this rank: `point` is the row or round it has reached. Nothing when no
// stage watch runs (a plain sweep without one, the unit tests).
void stage_beat(int64_t point);

}  // namespace tp
