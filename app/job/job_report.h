#pragma once
// The report's `job` and `cost` sections (docs/acceptance.md, "Timeline and goodput", "Cost"):
// every rank's timeline gathered into the job's, the queue time under Slurm, and the price of
// the completed work from the figures the report already holds.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "app/job/cost.h"
#include "app/job/job_timeline.h"
#include "mpi/world.h"
#include "train/step_loop.h"

namespace tp {

// The stages of an acceptance run that are not training: the cost of "the training stage alone"
// leaves them out.
inline const std::vector<std::string> kNonTrainingSegments = {"preflight", "sweep", "pairwise",
                                                              "cold_restore"};

StepPhaseSums phase_sums(const std::vector<StepTiming>& measured);

// Under Slurm, the job's submit-to-start time from `scontrol show job` (Slurm 22.05 has no
// start-time variable); nullopt outside Slurm or when scontrol cannot say, with `note` saying why.
std::optional<double> slurm_queue_seconds(std::string& note);
// Pure: submit-to-start from scontrol's "SubmitTime=... StartTime=..." text, or nullopt.
std::optional<double> queue_seconds_from(const std::string& scontrol_text);

// Collective: marks teardown, gathers every rank's timeline, and on rank 0 returns the section.
nlohmann::json gather_job_section(const World& world, JobClock& clock, const StepPhaseSums& mine);

// Pure: what the cost rests on, read from a report with `job` (and `train`, `checkpoint`, `data`,
// `restore`, `drill` when present).
CostInputs cost_inputs_from(const nlohmann::json& report);

}  // namespace tp
