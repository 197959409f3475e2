#pragma once
// The sweep stage: a collective sweep or a pairwise pass, which `sweep` runs alone and `accept`
// runs as one of its stages (docs/sweep.md).
#include <nlohmann/json.hpp>

#include <functional>
#include <string>

#include "app/cli/cli.h"
#include "app/stages/run_trace.h"
#include "app/stages/sweep_config.h"
#include "mpi/collective.h"
#include "mpi/world.h"

namespace tp {

// One sweep (collectives or pairwise, by cfg.mode) on the world, as `sweep` runs it and as a
// stage of `accept`. Rank 0 gets the sweep's report, not yet written; every rank's samples go to
// `trace`.
nlohmann::json sweep_stage(const Invocation& invocation, const SweepConfig& config,
                           const TrainConfig& train, const World& world, RunTrace& trace);

// Pure: "" or why the sweep's dtype cannot run over the collective `comm_name`, which says through
// `cannot_run` which operations it lacks, or at this world size. The stage checks the collective
// it got; accept, before its first stage, the one it will get.
std::string sweep_backend_problem(const SweepConfig& config, int world_size,
                                  const std::string& comm_name,
                                  const std::function<std::string(CollectiveOp)>& cannot_run);

}  // namespace tp
