#pragma once
#include <nlohmann/json.hpp>

#include "app/cli.h"
#include "app/cost.h"
#include "app/job_timeline.h"
#include "app/mpi_command.h"
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
};
// `job` is marked as the run's parts pass (app/job_timeline.h).
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

// `trainproof train`: one MPI rank of a data-parallel run. Returns the process exit code.
int run_train(const Invocation& invocation);

// `trainproof report FILE`: reprint a report's summary; exit code follows its verdict.
int run_report(const Invocation& invocation);

}  // namespace tp
