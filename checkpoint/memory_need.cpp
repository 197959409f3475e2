#include "checkpoint/memory_need.h"

#include <algorithm>

#include "checkpoint/slices.h"

namespace tp {

uint64_t checkpoint_memory_need(const CheckpointMemoryPlan& plan) {
  const uint64_t element_bytes = sizeof(float) * uint64_t(plan.tensors);
  const uint64_t state = element_bytes * plan.elements;
  const bool sliced = plan.layout == CheckpointLayout::shared_file || plan.shard_optimizer;
  // Rank 0's slice is the largest (slices.h).
  const uint64_t part =
      sliced ? element_bytes * rank_slice(plan.elements, 0, plan.world_size).size() : state;
  // The host copy the state is exported into, then this rank's part encoded for storage: the
  // in-memory HDF5 image (after a copy of the slice when sharded), or the shared file's slab.
  const uint64_t snapshot = state;
  const uint64_t encoding =
      plan.layout == CheckpointLayout::file_per_rank && plan.shard_optimizer ? 2 * part : part;
  // Async: the next checkpoint is exported before the previous snapshot is released.
  return plan.async ? snapshot + std::max(encoding, state) : snapshot + encoding;
}

}  // namespace tp
