#pragma once
// The host memory one rank's checkpoints need beyond the model itself (docs/checkpoint.md,
// "Memory"), checked at start next to the model's own need.
#include <cstdint>

namespace tp {

// The same for every layout and sharding: each save writes from one host copy of the state, or,
// when the save is synchronous and the state lives in host memory, from the state itself.
struct CheckpointMemoryPlan {
  uint64_t elements = 0;           // per tensor of the state: the model's parameters
  int tensors = 2;                 // parameters and first moment, and Adam's second moment
  bool writes_from_model = false;  // a synchronous save of a state in host memory (cpu backend)
};

// Peak bytes on one rank during a save.
uint64_t checkpoint_memory_need(const CheckpointMemoryPlan& plan);

}  // namespace tp
