#pragma once
// The host memory one rank's checkpoints need beyond the model itself (docs/checkpoint.md,
// "Memory"), checked at start next to the model's own need.
#include <cstdint>

#include "checkpoint/store.h"

namespace tp {

struct CheckpointMemoryPlan {
  CheckpointLayout layout = CheckpointLayout::file_per_rank;
  bool shard_optimizer = false;
  bool async = false;
  uint64_t elements = 0;  // per tensor of the state: the model's parameters
  int tensors = 2;        // parameters and first moment, and Adam's second moment
  int world_size = 1;
};

// Peak bytes on one rank (the one with the largest slice) during a save.
uint64_t checkpoint_memory_need(const CheckpointMemoryPlan& plan);

}  // namespace tp
