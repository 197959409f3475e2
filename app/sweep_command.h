#pragma once
#include <nlohmann/json.hpp>

#include "app/cli.h"
#include "app/sweep_config.h"
#include "mpi/world.h"

namespace tp {

// One sweep (collectives or pairwise, by cfg.mode) on the world, as `sweep` runs it and as a
// stage of `accept`. Rank 0 gets the sweep's report, not yet written.
nlohmann::json sweep_stage(const Invocation& invocation, const SweepConfig& config,
                           const TrainConfig& train, const World& world);

// `trainproof sweep`: one MPI rank of a collective sweep or a pairwise pass (docs/sweep.md).
// Returns the process exit code.
int run_sweep_command(const Invocation& invocation);

}  // namespace tp
