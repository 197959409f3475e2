#pragma once
// Checkpoints as a run uses them: the store, and with checkpoint.async the writer thread with a
// store of its own on a duplicated communicator; the restore at start; the stall each checkpoint
// costs training; and the step loop's hooks (a checkpoint every N steps, and a stop at an agreed
// preemption signal with that step's checkpoint committed). docs/checkpoint.md.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/async_writer.h"
#include "checkpoint/store.h"
#include "kernels/compute_backend.h"
#include "mpi/clock_sync.h"
#include "mpi/world.h"
#include "train/faults.h"
#include "train/step_loop.h"
#include "train/train_config.h"

namespace tp {

CheckpointOptions checkpoint_options(const TrainConfig& config);
// What the folder's preflight checks for this run: a checkpoint's size, and whether it starts
// fresh.
PreflightPlan checkpoint_preflight_plan(const TrainConfig& config, const CheckpointStore& store);

struct Preemption {
  int signal = 0;
  int64_t step = 0;  // the last step run; its checkpoint is committed
};

class CheckpointDriver {
 public:
  // Collective. Takes the folder for this run (its lock, held until the driver is destroyed) and
  // proves it usable from every rank, big enough, and not another scenario's before step 1
  // (UsageError otherwise).
  // `manifest_extra` adds fields to each manifest (the data loader's position).
  CheckpointDriver(const TrainConfig& config, const World& world, const AlignedClock& clock,
                   FaultInjector& faults,
                   std::function<nlohmann::json(int64_t step)> manifest_extra);
  ~CheckpointDriver();
  CheckpointDriver(const CheckpointDriver&) = delete;
  CheckpointDriver& operator=(const CheckpointDriver&) = delete;

  const CheckpointFolderFacts& folder() const { return folder_; }
  // Collective. With --resume auto or require, loads the newest checkpoint that verifies into
  // `backend`; the first step to run is then the one after it.
  std::optional<CheckpointRestore> restore(ComputeBackend& backend);
  int64_t first_step() const { return restored_ ? restored_->step + 1 : 1; }

  // Checkpoints every checkpoint.every steps; its time is the step's checkpoint stall. Allocates
  // and touches the host copy a save writes from, when one is needed, now. From this call on,
  // SIGTERM and SIGUSR1 request a stop (stop_requested).
  CheckpointHook checkpoint_hook(ComputeBackend& backend);
  // Collective, each step: true when a preemption signal reached any rank. Every rank then
  // checkpoints this step (unless it just did) and waits for the commit.
  bool stop_requested(int64_t step, ComputeBackend& backend);
  // After the run: waits for the last asynchronous commit, then closes the writer.
  void finish();

  // The checkpoints this run committed, with training's stall for each (rank 0's figures).
  const std::vector<CheckpointSave>& saves() const { return saves_; }
  double final_wait_s() const { return final_wait_s_; }
  // This rank's wait for each checkpoint it took: step, seconds.
  const std::vector<std::pair<int64_t, double>>& stalls() const { return stalls_; }
  const std::optional<Preemption>& preempted() const { return preempted_; }

 private:
  void take_checkpoint(int64_t step, ComputeBackend& backend);
  void prepare_host_copy(ComputeBackend& backend);
  void unpin_host_copy();

  const TrainConfig& config_;
  const World& world_;
  const AlignedClock& clock_;
  CheckpointStore store_;
  CheckpointFolderFacts folder_;
  std::optional<CheckpointRestore> restored_;
  // The async writer's own communicator and store: its collectives never interleave with the
  // step's.
  World writer_world_;
  std::unique_ptr<CheckpointStore> writer_store_;
  std::unique_ptr<AsyncCheckpointWriter> writer_;
  std::vector<CheckpointSave> saves_;
  TrainingState host_state_;  // a synchronous save's host copy of the state, kept for the next
  TrainingState* pinned_ = nullptr;  // the host copy the backend page-locked, if any
  ComputeBackend* pinned_by_ = nullptr;
  std::vector<std::pair<int64_t, double>> stalls_;  // step, seconds training waited
  int64_t last_checkpoint_ = 0;
  double final_wait_s_ = 0;
  std::optional<Preemption> preempted_;
};

}  // namespace tp
