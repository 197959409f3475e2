#include "checkpoint/memory_need.h"

namespace tp {

uint64_t checkpoint_memory_need(const CheckpointMemoryPlan& plan) {
  // One host copy of the rank's state, allocated by the first save and reused by the rest: the
  // synchronous export, or the async snapshot (the next export waits for the previous write).
  // Each file is written from that copy in place, whatever the layout or sharding, so nothing
  // else of the state's size is held (docs/checkpoint.md, "Memory").
  return sizeof(float) * uint64_t(plan.tensors) * plan.elements;
}

}  // namespace tp
