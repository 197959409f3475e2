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

// A rank file's bytes checked against `expected_checksum` (xxh3-128 hex of all of them) and
// decoded in the same pass: HDF5 reads only the metadata, to find the datasets and attributes;
// then every byte is hashed in file order and each dataset's bytes copied into `state` right after
// they are hashed, while still in cache. "" or what is wrong: a failed checksum first, then a file
// that does not decode. `state` holds nothing usable unless "" is returned.
std::string verify_and_decode_checkpoint_image(const unsigned char* image, size_t size,
                                               const std::string& expected_checksum,
                                               const std::string& what, TrainingState& state,
                                               CheckpointMeta& meta);
// Throws RuntimeError naming `what` (the file) when the image is not a readable checkpoint.
void decode_checkpoint_image(const unsigned char* image, size_t size, const std::string& what,
                             TrainingState& state, CheckpointMeta& meta);

}  // namespace tp
