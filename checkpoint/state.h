#pragma once
// Metadata stored beside a rank's state in its checkpoint file, checked on restore.
#include <cstdint>
#include <string>

namespace tp {

struct CheckpointMeta {
  int64_t step = 0;
  int world_size = 0;
  int rank = 0;
  std::string scenario_hash;
  std::string layout = "file-per-rank";
  // The element range of every tensor this file holds, out of `total_elements`: the whole state,
  // or one rank's slice when the optimizer state is sharded.
  uint64_t slice_begin = 0;
  uint64_t slice_end = 0;
  uint64_t total_elements = 0;
};

}  // namespace tp
