#pragma once
// Everything the selected stages of `accept` will need, checked on every rank and agreed before the
// first stage starts (docs/acceptance.md, "Checked before the first stage"): a bad input is exit 2
// in the first seconds, never after the sweep, and leaves no report and no folder behind.
#include <memory>
#include <string>

#include "app/accept/accept_config.h"
#include "app/stages/sweep_config.h"
#include "checkpoint/folder_lock.h"
#include "mpi/world.h"
#include "train/train_config.h"

namespace tp {

// Collective. Throws the agreed UsageError (exit 2) or EnvironmentError (exit 3) that the first
// failing stage would have met: the batch against the world size, the faults, the heartbeat
// folder, the dataset's index, the backends and the dtypes they run, and the checkpoint folder
// (usable from every rank, big enough, not another scenario's or another job's, holding a
// checkpoint when --resume require). With checkpoint.dir, returns the folder's lock (held on rank
// 0), which the run holds to its end so that no other job can take the folder between stages.
std::shared_ptr<const FolderLock> check_accept_inputs(const TrainConfig& train,
                                                      const SweepConfig& sweep,
                                                      const AcceptConfig& accept,
                                                      const std::string& report_path,
                                                      const World& world);

}  // namespace tp
