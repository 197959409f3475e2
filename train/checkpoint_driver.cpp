#include "train/checkpoint_driver.h"

#include <mpi.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

#include "checkpoint/slices.h"
#include "common/errors.h"
#include "mpi/check.h"
#include "train/preemption.h"

namespace tp {

CheckpointOptions checkpoint_options(const TrainConfig& config) {
  CheckpointOptions o;
  o.dir = config.checkpoint_dir;
  o.keep = config.checkpoint_keep;
  o.cold_read = config.checkpoint_cold_read;
  o.layout = parse_layout(config.checkpoint_layout);
  o.shard_optimizer = config.checkpoint_shard_optimizer;
  o.overwrite = config.checkpoint_overwrite;
  o.allow_resize = config.checkpoint_allow_resize;
  o.lock_wait_s = config.checkpoint_lock_wait_s;
  o.held_lock = config.checkpoint_lock;
  o.test_unshared_rank = config.test.unshared_checkpoint_rank;
  return o;
}

PreflightPlan checkpoint_preflight_plan(const TrainConfig& config, const CheckpointStore& store) {
  PreflightPlan plan;
  plan.checkpoint_bytes = store.expected_bytes(uint64_t(config.model.parameters()),
                                               config.optimizer.kind == OptimizerKind::adam);
  plan.fresh_start = config.resume == "none";
  return plan;
}

CheckpointDriver::CheckpointDriver(const TrainConfig& config, const World& world,
                                   const AlignedClock& clock, FaultInjector& faults,
                                   std::function<nlohmann::json(int64_t)> manifest_extra)
    : config_(config),
      world_(world),
      clock_(clock),
      store_(checkpoint_options(config), world, scenario_hash(config), clock),
      writer_world_(world) {
  folder_ = store_.preflight(checkpoint_preflight_plan(config, store_));
  if (config.resume == "none" && world.rank == 0 && store_.newest_committed() > 0)
    spdlog::warn(
        "checkpoint.dir '{}' already holds checkpoints up to step {}; --resume none "
        "starts fresh and replaces those it reaches",
        config.checkpoint_dir, store_.newest_committed());
  const auto fault_hook = [&faults](int64_t step, const char* point) {
    faults.at_checkpoint(step, point);
  };
  store_.set_fault_hook(fault_hook);
  store_.set_manifest_extra(manifest_extra);
  if (config.checkpoint_async) {
    mpiCheck(MPI_Comm_dup(world.comm, &writer_world_.comm));
    writer_store_ = std::make_unique<CheckpointStore>(checkpoint_options(config), writer_world_,
                                                      scenario_hash(config), clock);
    writer_store_->set_fault_hook(fault_hook);
    writer_store_->set_manifest_extra(manifest_extra);
    writer_ = std::make_unique<AsyncCheckpointWriter>(*writer_store_);
  }
}

CheckpointDriver::~CheckpointDriver() {
  unpin_host_copy();  // only unlocks the pages: a write still running from them is unaffected
  writer_.reset();
  writer_store_.reset();
  if (writer_world_.comm != world_.comm) MPI_Comm_free(&writer_world_.comm);
}

std::optional<CheckpointRestore> CheckpointDriver::restore(ComputeBackend& backend) {
  if (config_.resume == "none") return std::nullopt;
  // The restore decodes into buffers the model already has, as a framework loads a state into
  // allocated parameters: allocating (and faulting in) the memory is set-up, not restore.
  TrainingState state;
  backend.export_state(state);
  restored_ = store_.restore(state);
  if (restored_) {
    if (config_.test.skip_restore == "moment1")
      std::fill(state.moment1.begin(), state.moment1.end(), 0.0f);
    backend.import_state(state);
    if (world_.rank == 0)
      spdlog::info("restored {} (step {}, {:.3f} s)", restored_->folder, restored_->step,
                   restored_->seconds);
  } else if (config_.resume == "require") {
    throw UsageError("--resume require: no valid checkpoint in checkpoint.dir '" +
                     config_.checkpoint_dir + "'");
  } else if (world_.rank == 0) {
    spdlog::warn("--resume auto: no valid checkpoint in '{}'; STARTING FRESH from step 1",
                 config_.checkpoint_dir);
  }
  return restored_;
}

// The stall is what training waits: the whole save when synchronous; when async, the wait for the
// previous checkpoint plus the snapshot into host memory.
void CheckpointDriver::take_checkpoint(int64_t step, ComputeBackend& backend) {
  const double begin = clock_.local_now();
  if (writer_) {
    writer_->submit([&](TrainingState& snapshot) {
      snapshot.step = step;
      backend.export_state(snapshot);
    });
  } else if (const TrainingState* resident = backend.host_resident_state(step)) {
    saves_.push_back(store_.save(*resident));
  } else {
    // The host copy was touched when the loop was armed; every save reuses it.
    host_state_.step = step;
    backend.export_state(host_state_);
    saves_.push_back(store_.save(host_state_));
  }
  stalls_.emplace_back(step, clock_.local_now() - begin);
  last_checkpoint_ = step;
}

// The host copy a save writes from is allocated and touched here, before step 1, so the first
// checkpoint stalls no longer than the rest. A state in host memory is written from where it is.
// On a GPU the copy is page-locked for the run, and released before its memory is freed.
void CheckpointDriver::prepare_host_copy(ComputeBackend& backend) {
  if (config_.checkpoint_every == 0 || pinned_ != nullptr) return;
  const auto pin = [this, &backend](TrainingState& copy) {
    backend.export_state(copy);
    if (!backend.pin_host_copy(copy) && world_.rank == 0)
      spdlog::warn(
          "cannot page-lock the checkpoint's host copy ({} MB): each checkpoint's "
          "device-to-host copy goes through a staging buffer, and stalls training longer",
          state_bytes(copy) / 1000000);
    pinned_ = &copy;
    pinned_by_ = &backend;
  };
  if (writer_)
    writer_->prepare(pin);
  else if (backend.host_resident_state(0) == nullptr)
    pin(host_state_);
}

void CheckpointDriver::unpin_host_copy() {
  if (pinned_ != nullptr) pinned_by_->unpin_host_copy(*pinned_);
  pinned_ = nullptr;
}

CheckpointHook CheckpointDriver::checkpoint_hook(ComputeBackend& backend) {
  prepare_host_copy(backend);
  // Armed as the loop starts: before it, a signal ends the process as it would any program.
  install_preemption_handlers();
  return [this, &backend](int64_t step) {
    if (config_.checkpoint_every == 0 || step % config_.checkpoint_every != 0) return false;
    take_checkpoint(step, backend);
    return true;
  };
}

// The agreement costs one small allreduce per step.
bool CheckpointDriver::stop_requested(int64_t step, ComputeBackend& backend) {
  const int signal = agreed_stop(world_.comm);
  if (signal == 0) return false;
  if (last_checkpoint_ != step) take_checkpoint(step, backend);
  if (writer_) writer_->wait();
  preempted_ = Preemption{signal, step};
  if (world_.rank == 0)
    spdlog::warn(
        "{}: stopped after step {} with its checkpoint committed; resume with "
        "--resume auto",
        signal == kStopBudget ? "the time budget ran out"
                              : std::string(signal_name(signal)) + " received",
        step);
  return true;
}

// The run is not over until its last checkpoint is committed.
void CheckpointDriver::finish() {
  if (writer_) {
    const double begin = clock_.local_now();
    writer_->wait();
    final_wait_s_ = clock_.local_now() - begin;
    saves_ = writer_->take_committed();
    unpin_host_copy();  // the snapshot is the writer's: released before its memory is
    writer_.reset();
    writer_store_.reset();
    mpiCheck(MPI_Comm_free(&writer_world_.comm));
    writer_world_.comm = world_.comm;
  }
  unpin_host_copy();  // a synchronous save's host copy
  for (CheckpointSave& save : saves_)
    for (const auto& [step, seconds] : stalls_)
      if (save.step == step) save.stall_s = seconds;
}

}  // namespace tp
