#pragma once
// The training step loop: data -> compute (forward, backward with bucketed reductions overlapped)
// -> wait for communication -> optimizer. It times every phase of every step on this rank.
#include <cstdint>
#include <functional>
#include <vector>

#include "common/digest.h"
#include "data/batch_source.h"
#include "kernels/compute_backend.h"
#include "mpi/clock_sync.h"
#include "mpi/collective.h"
#include "train/bucket_plan.h"
#include "train/faults.h"
#include "train/heartbeat.h"
#include "train/train_config.h"

namespace tp {

// Seconds spent in each phase of one step on one rank.
struct StepTiming {
  double data = 0;          // waiting for the batch
  double compute = 0;       // forward + backward, including progress calls between GEMMs
  double comm = 0;          // time any bucket was in flight (mpi/collective.h busy_seconds)
  double comm_exposed = 0;  // waiting for communication after compute finished
  double optimizer = 0;
  double checkpoint = 0;
  double step = 0;
  double arrival = 0;  // entry into the step's first collective, on the clock aligned to rank 0
};
inline constexpr int kStepTimingFields = 8;
std::vector<double> flatten(const std::vector<StepTiming>& timings);
std::vector<StepTiming> unflatten(const double* values, size_t steps);

struct TrainResult {
  std::vector<StepTiming> measured;  // steps after warm-up
  // [measured step][bucket]: each bucket's reduction time on this rank (start to end; it
  // includes waiting for the peers that started it later)
  std::vector<std::vector<double>> bucket_seconds;
  // For the trace (docs/report.md, "The trace"), per measured step: its number, its start on the
  // clock aligned to rank 0, and each bucket's reduction from the step's start.
  std::vector<int64_t> measured_steps;
  std::vector<double> step_start;
  std::vector<std::vector<BucketTime>> bucket_intervals;
  int64_t steps_run = 0;  // steps this process computed
  int64_t last_step = 0;  // the state held at the end is step-last_step
  Digest128 digest;
};

// Called after the optimizer of step s; returns true when it took a checkpoint. The time it takes
// is the step's checkpoint stall.
using CheckpointHook = std::function<bool(int64_t step)>;
// Called at the end of step s; true stops the run there (preemption).
using StopHook = std::function<bool(int64_t step)>;

class StepLoop {
 public:
  StepLoop(const TrainConfig& config, int rank, ComputeBackend& backend, Collective& collective,
           BatchSource& source, FaultInjector& faults, Heartbeat& heartbeat,
           const AlignedClock& clock);
  // Runs steps first_step..config.steps; the state must already be that after first_step - 1.
  TrainResult run(int64_t first_step = 1, CheckpointHook checkpoint = nullptr,
                  StopHook stop = nullptr);

 private:
  StepTiming step(int64_t step_number, const CheckpointHook& checkpoint);
  // The step's communication figures, from the collective's own timing.
  void take_comm_timing(StepTiming& timing);
  // Entering a phase: the heartbeat records it, then any fault aimed at it fires.
  void enter(int64_t step, Phase phase);

  const TrainConfig& config_;
  int rank_;
  ComputeBackend& backend_;
  Collective& collective_;
  BatchSource& source_;
  FaultInjector& faults_;
  Heartbeat& heartbeat_;
  const AlignedClock& clock_;
  std::vector<Bucket> buckets_;
  Batch batch_;
  std::vector<double> last_bucket_seconds_;        // the last step's, by bucket
  double last_step_start_ = 0;                     // the last step's, on the aligned clock
  std::vector<BucketTime> last_bucket_intervals_;  // the last step's, from its start
};

}  // namespace tp
