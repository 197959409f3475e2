#pragma once
// A rank's checkpoint file (written by checkpoint/rank_file.h) decoded from its verified bytes,
// opened as an HDF5 file image.
// Debian's HDF5 is not thread-safe, so every HDF5 call in this process goes through one lock.
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/state.h"
#include "common/training_state.h"

namespace tp {

// Throws RuntimeError naming `what` (the file) when the image is not a readable checkpoint.
void decode_checkpoint_image(const unsigned char* image, size_t size, const std::string& what,
                             TrainingState& state, CheckpointMeta& meta);

}  // namespace tp
