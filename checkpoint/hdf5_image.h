#pragma once
// A rank's checkpoint as an HDF5 file built in memory (core driver, no backing store): the bytes
// are checksummed before they touch storage and written with one write, so verification never
// costs a second pass over the disk. Restore opens the verified buffer as a file image.
// Debian's HDF5 is not thread-safe, so every HDF5 call in this process goes through one lock.
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/state.h"
#include "common/training_state.h"

namespace tp {

std::vector<unsigned char> encode_checkpoint_image(const TrainingState& state,
                                                   const CheckpointMeta& meta);
// Throws RuntimeError naming `what` (the file) when the image is not a readable checkpoint.
void decode_checkpoint_image(const unsigned char* image, size_t size, const std::string& what,
                             TrainingState& state, CheckpointMeta& meta);

}  // namespace tp
