#include "checkpoint/memory_need.h"

namespace tp {

uint64_t checkpoint_memory_need(const CheckpointMemoryPlan& plan) {
  // One host copy of the rank's state, allocated by the first save and reused by the rest: the
  // synchronous export from a GPU, or the async snapshot (the next export waits for the previous
  // write). Each file is written from that copy, or from the model's own state, in place,
  // whatever the layout or sharding, so nothing else of the state's size is held
  // (docs/checkpoint.md, "Memory").
  if (plan.writes_from_model) return 0;
  return sizeof(float) * uint64_t(plan.tensors) * plan.elements;
}

}  // namespace tp
