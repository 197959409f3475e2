#pragma once
// The collective sweep (docs/sweep.md, "Timing" and "Correctness"): every operation at every size,
// out of place and in place, timed as nccl-tests times it and checked element by element on every
// row, outside the timed region.
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fabric/bus_bandwidth.h"
#include "mpi/collective.h"

namespace tp {

struct SweepPlan {
  std::vector<CollectiveOp> ops;
  ElementType type = ElementType::f32;
  uint64_t min_bytes = 1024, max_bytes = 64ull << 20;
  double factor = 2.0;
  int iters = 20, warmup = 5;
  int corrupt_rank = -1;  // test only: this group rank's result is perturbed before the check
};

struct SweepRow {
  CollectiveOp op = CollectiveOp::allreduce;
  ElementType type = ElementType::f32;
  uint64_t bytes = 0;  // count x element size
  uint64_t count = 0;  // nccl-tests' convention (fabric/sweep_data.h row_shape)
  bool in_place = false;
  int root = -1;        // broadcast's root, else -1
  std::string not_run;  // why the backend cannot run this row ("" when it ran)
  double mean_us = 0;   // each rank's mean over back-to-back iterations, averaged over ranks
  double p50_us = 0, p99_us = 0;         // per iteration, the slowest rank's time
  std::vector<double> iteration_s;       // each timed iteration: its slowest rank's time
  std::vector<double> rank_iteration_s;  // each timed iteration: this rank's time
  double algbw_gbps = 0, busbw_gbps = 0;
  uint64_t wrong = 0;         // wrong elements over every rank of the group
  int first_wrong_rank = -1;  // world rank of the lowest group rank with a wrong element
};

// The ranks a sweep runs among: the collective, an MPI communicator over the same ranks in the same
// order (for the timing's barriers and reductions), and each group rank's world rank.
struct SweepGroup {
  Collective& collective;
  MPI_Comm comm;
  std::vector<int> world_rank_of;
};

// Buffer sizes from min_bytes, multiplied by factor up to max_bytes (both included when they fall
// on the progression; max_bytes is added when the last step overshoots it). Each size is at least
// `unit` bytes (one element) above the one before, however close to 1 the factor is, and the list
// stops after kMaxSweepSizes + 1 sizes: a caller that gets more than kMaxSweepSizes refuses the
// plan (sweep.factor too close to 1 for the range).
inline constexpr size_t kMaxSweepSizes = 128;
std::vector<uint64_t> sweep_sizes(uint64_t min_bytes, uint64_t max_bytes, double factor,
                                  uint64_t unit = 1);

// Host memory one rank needs for rows of up to `max_bytes`: the send and receive buffers (when
// they are host memory), the encoded input, the result read back for checking, and the expected
// result (8 bytes an element). 6 x max_bytes for float32 over MPI; measured at about 6.5 x with
// the MPI library's own buffers (docs/sweep.md, "Memory").
uint64_t sweep_host_bytes(uint64_t max_bytes, ElementType type, bool buffers_on_host);

// sweep.max_bytes=0 (auto, docs/sweep.md "Sizes"): 64 MiB up to 32 ranks, doubled each time the
// ranks double past that (a ring of thousands of ranks reaches its peak bus bandwidth only at
// gigabytes), at most 16 GiB, and never below `at_least` (gate.busbw_bytes) within that.
uint64_t auto_sweep_max_bytes(int world_size, uint64_t at_least);
// `max_bytes` halved until `local_ranks` ranks' host bytes (sweep_host_bytes) fit in 90% of
// `available`, never below `min_bytes`; 0 when even that does not fit.
uint64_t fit_sweep_max_bytes(uint64_t max_bytes, uint64_t min_bytes, ElementType type,
                             bool buffers_on_host, int local_ranks, uint64_t available);

// The row's element count for `bytes`: whole elements, rounded down to a multiple of the ranks for
// allgather, reducescatter and alltoall (as nccl-tests does).
uint64_t row_count(CollectiveOp op, ElementType type, int ranks, uint64_t bytes);

// Runs the plan on every rank of `group`; every rank gets every row. `on_row` sees each row as it
// completes (in op, size, out-of-place-then-in-place order).
std::vector<SweepRow> run_sweep(const SweepGroup& group, const SweepPlan& plan,
                                const std::function<void(const SweepRow&)>& on_row);

// busbw averaged over rows that ran, all of them or those of at least `min_bytes`; none when no
// such row ran (nothing measured is not a bandwidth of 0).
std::optional<double> average_busbw(const std::vector<SweepRow>& rows, uint64_t min_bytes = 0);

}  // namespace tp
