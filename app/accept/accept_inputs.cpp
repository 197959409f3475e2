#include "app/accept/accept_inputs.h"

#include <mpi.h>

#include "app/stages/backend_selection.h"
#include "app/stages/sweep_stage.h"
#include "app/stages/train_setup.h"
#include "checkpoint/store.h"
#include "common/errors.h"
#include "mpi/check.h"
#include "mpi/clock_sync.h"
#include "mpi/mpi_operations.h"
#include "train/checkpoint_driver.h"

namespace tp {
namespace {

bool trains(const AcceptConfig& accept) {
  return accept.runs("train") || accept.runs("restore");
}

// The training stage's own checks, on a copy: what it resolves (the dataset's shape, random
// faults) it resolves again when it starts.
void check_training_inputs(TrainConfig& cfg, const AcceptConfig& accept,
                           const std::string& report_path, const World& world) {
  if (!cfg.data.dir.empty() && (trains(accept) || accept.runs("preflight")))
    reconcile_dataset(cfg, world);
  if (!trains(accept)) return;
  check_batch_covers_world(cfg, world);
  resolve_faults(cfg, world);
  // The heartbeat folder (watchdog.dir), made and removed again as a clean end removes it.
  const auto heartbeat = prepare_outputs(cfg, report_path, world);
  heartbeat->finish();
  mpiCheck(MPI_Barrier(world.comm));
  if (world.rank == 0) heartbeat->remove_folder(cfg.watchdog_dir.empty());
}

void check_backend_inputs(const TrainConfig& cfg, const SweepConfig& sweep,
                          const AcceptConfig& accept, const World& world) {
  if (!trains(accept) && !accept.runs("sweep") && !accept.runs("pairwise")) return;
  const std::string comm = expected_comm_backend(cfg, world);
  if ((!accept.runs("sweep") && !accept.runs("pairwise")) || comm.empty()) return;
  // NCCL's own list lives in the GPU library; the stage checks it when NCCL is up.
  const auto cannot_run = [&](CollectiveOp op) {
    return comm == "mpi" ? mpi_cannot_run(op, sweep.plan.type, false) : std::string();
  };
  agree_or_throw<UsageError>(world, sweep_backend_problem(sweep, world.size, comm, cannot_run));
}

// The store that took the lock lives as long as the lock handed out; its clock with it.
struct HeldFolder {
  AlignedClock clock;
  std::unique_ptr<CheckpointStore> store;
};

std::shared_ptr<const FolderLock> hold_checkpoint_folder(const TrainConfig& cfg,
                                                         const AcceptConfig& accept,
                                                         const World& world) {
  // The preflight stage probes the folder itself; only training writes and locks it.
  if (cfg.checkpoint_dir.empty() || !trains(accept)) return nullptr;
  // Training hashes the dataset's shape as its index gives it (app/stages/train_setup.h).
  TrainConfig hashed = cfg;
  reconcile_dataset(hashed, world);
  auto held = std::make_shared<HeldFolder>();
  held->store = std::make_unique<CheckpointStore>(checkpoint_options(cfg), world,
                                                  scenario_hash(hashed), held->clock);
  held->store->preflight(checkpoint_preflight_plan(cfg, *held->store));
  std::string problem;
  if (cfg.resume == "require" && world.rank == 0 && held->store->newest_committed() == 0)
    problem = "--resume require: checkpoint.dir '" + cfg.checkpoint_dir +
              "' holds no committed checkpoint";
  agree_or_throw<UsageError>(world, problem);
  return std::shared_ptr<const FolderLock>(held, &held->store->folder_lock());
}

}  // namespace

std::shared_ptr<const FolderLock> check_accept_inputs(const TrainConfig& train,
                                                      const SweepConfig& sweep,
                                                      const AcceptConfig& accept,
                                                      const std::string& report_path,
                                                      const World& world) {
  TrainConfig cfg = train;
  check_training_inputs(cfg, accept, report_path, world);
  check_backend_inputs(cfg, sweep, accept, world);
  return hold_checkpoint_folder(cfg, accept, world);
}

}  // namespace tp
