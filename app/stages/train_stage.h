#pragma once
// The training stage: one training run on the world, which `train` runs alone and `accept` runs
// as one of its stages (docs/architecture.md, "How a step flows").
#include <nlohmann/json.hpp>

#include "app/cli/cli.h"
#include "app/cli/mpi_command.h"
#include "app/job/cost.h"
#include "app/job/job_timeline.h"
#include "app/stages/run_trace.h"
#include "common/digest.h"
#include "mpi/world.h"

namespace tp {

// One training run on the world, as `train` runs it and as a stage of `accept`.
struct TrainStage {
  nlohmann::json report;  // rank 0: the run's report, not yet written
  bool preempted = false;
  Digest128 digest;  // this rank's final state
  int64_t last_step = 0;
  StepPhaseSums sums;  // this rank's measured steps, for the job's timeline
  RunTrace trace;      // this rank's samples (docs/report.md, "The trace")
};
// `job` is marked as the run's parts pass (app/job/job_timeline.h).
TrainStage train_stage(const Invocation& invocation, TrainConfig config, const World& world,
                       JobClock& job);

// Collective: gathers the job's timeline into report["job"] and prices it into report["cost"]
// (rank 0).
void add_job_and_cost(nlohmann::json& report, const World& world, JobClock& job,
                      const StepPhaseSums& sums, const CostRates& rates);

// Rank 0 writes the report to --report and prints its summary; every rank returns the exit code
// (4 when preempted, else the verdict's).
int publish_report(const Invocation& invocation, nlohmann::json& report, const World& world,
                   bool preempted);

// How a command that trains starts MPI: the thread level the async checkpoint writer needs, and
// test.split_hosts' pretend hosts.
MpiCommand training_command(const std::string& name, const Invocation& invocation,
                            const TrainConfig& config);

}  // namespace tp
