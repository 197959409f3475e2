#pragma once
// What a run keeps on each rank for its trace, and the collective write of it beside the report
// (docs/report.md, "The trace"). The report holds statistics; the trace holds the samples.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "app/cli/cli.h"
#include "checkpoint/store.h"
#include "fabric/sweep_runner.h"
#include "mpi/world.h"
#include "train/step_loop.h"
#include "train/train_config.h"

namespace tp {

// This rank's samples of every stage that ran; each stage fills its part.
struct RunTrace {
  bool has_train = false;
  std::vector<int64_t> steps;  // measured steps
  std::vector<StepTiming> timings;
  std::vector<double> step_start;
  std::vector<std::vector<BucketTime>> buckets;  // from each step's start

  bool has_checkpoints = false;
  std::vector<CheckpointSave> saves;               // rank 0's records (others may be empty)
  std::vector<std::pair<int64_t, double>> stalls;  // this rank's: step, seconds

  bool has_sweep = false;
  std::vector<SweepRow> sweep_rows;  // this rank's group's rows, with this rank's iterations

  // The pairwise pass's matrices, a rail each, held by rank 0 (set on every rank that ran the
  // pass): the report keeps them only for small rails (docs/report.md, "The trace").
  bool has_pairwise = false;
  struct PairwiseMatrices {
    int rail = 0;
    uint64_t nodes = 0;
    std::vector<double> one_way, both_ways;  // [nodes x nodes] GB/s, NaN where not measured
  };
  std::vector<PairwiseMatrices> pairwise;
};

// Moves into `into` each part that `from` holds (a stage run again replaces its earlier part).
void take_parts(RunTrace& into, RunTrace&& from);

// The training run's part of the trace.
void add_train_trace(RunTrace& trace, const TrainResult& result);

// Collective. Writes the trace that --trace names (by default beside --report) and records its
// path in report["context"]["trace"] (rank 0); a trace that cannot be written is a warning in
// the report, not a failed run. `subcommand` names the run in the file. Its collective writes are
// watched as a stage's are (app/stages/stage_watch.h, phase "trace"): a rank that hangs in them
// is named and the job ends, rather than waiting with no deadline.
void write_run_trace(const Invocation& invocation, const TrainConfig& config, const World& world,
                     nlohmann::json& report, const RunTrace& trace, const std::string& subcommand);

}  // namespace tp
