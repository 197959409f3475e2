#pragma once
// The sweep stage: a collective sweep or a pairwise pass, which `sweep` runs alone and `accept`
// runs as one of its stages (docs/sweep.md).
#include <nlohmann/json.hpp>

#include "app/cli/cli.h"
#include "app/stages/sweep_config.h"
#include "mpi/world.h"

namespace tp {

// One sweep (collectives or pairwise, by cfg.mode) on the world, as `sweep` runs it and as a
// stage of `accept`. Rank 0 gets the sweep's report, not yet written.
nlohmann::json sweep_stage(const Invocation& invocation, const SweepConfig& config,
                           const TrainConfig& train, const World& world);

}  // namespace tp
