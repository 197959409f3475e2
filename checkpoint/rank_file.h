#pragma once
// A rank's checkpoint file (file-per-rank), written without building it in memory: HDF5 lays the
// file out on disk (sec2 driver, every dataset allocated at creation and never filled, large ones
// aligned) and writes only its metadata; the data is then written from the state's own buffers
// with large pwrites at each dataset's offset, and fsynced. The xxh3-128 covers every byte of the
// file in file order (metadata, data, padding): the metadata and padding read back from the
// closed file (small), the data from the buffers as each piece is written, so the checksum costs
// no second pass over the data (docs/checkpoint.md, "Commit protocol").
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/slices.h"
#include "checkpoint/state.h"
#include "common/training_state.h"

namespace tp {

// Datasets of at least this many bytes start at a multiple of it (H5Pset_alignment): page-aligned
// writes, at the cost of at most this much padding before each (a 1 MiB stripe would cost 4% of a
// 25 MiB file).
inline constexpr uint64_t kDatasetAlignment = uint64_t(64) << 10;

// A rank file's size, erring high by a few KiB, for datasets of `tensor_bytes` (params, moment1,
// moment2).
uint64_t rank_file_size_estimate(const std::array<uint64_t, 3>& tensor_bytes);

// The elements [begin, end) of one tensor, where they live.
struct TensorView {
  const float* data = nullptr;
  size_t size = 0;
};
// params, moment1, moment2 (the dataset order), each cut to `slice` (whole when the slice is all
// of params); moment2 may be empty. RuntimeError when a tensor is shorter than the slice.
std::array<TensorView, 3> tensor_views(const TrainingState& state, Slice slice);

// A rank file whose metadata is on disk and whose datasets are allocated but not yet written.
struct RankFileLayout {
  struct Extent {
    uint64_t offset = 0;
    const unsigned char* data = nullptr;
    uint64_t bytes = 0;
  };
  std::string path;
  uint64_t size = 0;            // the whole file, as HDF5 closed it
  std::vector<Extent> extents;  // the datasets' bytes, by offset; empty datasets have none
};

// Creates `path` and writes the file's HDF5 metadata and attributes; the data stays the caller's
// (`tensors` must outlive the write). RuntimeError names the file.
RankFileLayout lay_out_rank_file(const std::string& path, const std::array<TensorView, 3>& tensors,
                                 const CheckpointMeta& meta);

struct RankFileData {
  std::string checksum;  // xxh3-128 of the whole file, as hex
  double fsync_s = 0;
};
// Reserves the file's blocks, writes every extent at its offset, hashes the file in file order,
// and fsyncs. `midway`, when set, runs once half of the data is written (a ckpt-write fault).
// RuntimeError names the file and the errno text.
RankFileData write_rank_file_data(const RankFileLayout& layout,
                                  const std::function<void()>& midway = {});

}  // namespace tp
