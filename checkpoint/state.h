#pragma once
// Metadata stored beside a rank's state in its checkpoint file, checked on restore.
#include <cstdint>
#include <string>

#include "kernels/compute_backend.h"

namespace tp {

struct CheckpointMeta {
  int64_t step = 0;
  int world_size = 0;
  int rank = 0;
  std::string scenario_hash;
  std::string layout = "file-per-rank";
};

}  // namespace tp
