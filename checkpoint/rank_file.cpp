#include "checkpoint/rank_file.h"

#include <fcntl.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <utility>

#include "checkpoint/hashed_io.h"
#include "checkpoint/storage_space.h"
#include "common/digest.h"
#include "common/errors.h"
#include "common/hdf5_lock.h"
#include "common/hdf5_util.h"

namespace tp {
namespace {

using h5::check;
using h5::Handle;
using h5::write_attribute;

constexpr const char* kDatasetNames[3] = {"params", "moment1", "moment2"};
// HDF5 places small metadata in blocks of this size: one holds every dataset's header, so none
// lands between two datasets and the file's size follows from the datasets' (the estimate).
constexpr uint64_t kMetadataBlock = uint64_t(64) << 10;
// Attributes written after the datasets go to the end of the file: a few hundred bytes.
constexpr uint64_t kTrailingMetadata = uint64_t(16) << 10;
// Data goes out in pieces this large, each hashed right after its write while still in cache.
constexpr uint64_t kWritePiece = uint64_t(4) << 20;
// Metadata and padding are read back through a buffer this small: below malloc's mmap
// threshold, so it reuses heap memory instead of faulting in fresh pages on every save.
constexpr size_t kReadBackPiece = size_t(64) << 10;

// Creates a dataset whose storage HDF5 allocates at once and never fills: the data is written by
// the caller at the returned offset (HADDR_UNDEF for an empty dataset).
haddr_t allocate_dataset(hid_t file, const char* name, size_t elements) {
  const hsize_t dims[1] = {elements};
  Handle space{H5Screate_simple(1, dims, nullptr), H5Sclose};
  Handle create{H5Pcreate(H5P_DATASET_CREATE), H5Pclose};
  // No modification times in the object headers: the same state gives the same bytes.
  check(H5Pset_obj_track_times(create.id, false) >= 0, "dataset creation properties");
  check(H5Pset_alloc_time(create.id, H5D_ALLOC_TIME_EARLY) >= 0, "early allocation");
  check(H5Pset_fill_time(create.id, H5D_FILL_TIME_NEVER) >= 0, "no fill");
  Handle set{H5Dcreate2(file, name, H5T_IEEE_F32LE, space.id, H5P_DEFAULT, create.id, H5P_DEFAULT),
             H5Dclose};
  check(set.id >= 0, std::string("cannot create dataset ") + name);
  return elements == 0 ? HADDR_UNDEF : H5Dget_offset(set.id);
}

void write_attributes(hid_t file, const CheckpointMeta& meta) {
  write_attribute(file, "step", meta.step);
  write_attribute(file, "world_size", int64_t(meta.world_size));
  write_attribute(file, "rank", int64_t(meta.rank));
  write_attribute(file, "scenario_hash", meta.scenario_hash);
  write_attribute(file, "layout", meta.layout);
  write_attribute(file, "slice_begin", int64_t(meta.slice_begin));
  write_attribute(file, "slice_end", int64_t(meta.slice_end));
  write_attribute(file, "total_elements", int64_t(meta.total_elements));
  write_attribute(file, "format", std::string("trainproof.checkpoint/1"));
}

class OpenFile {
 public:
  OpenFile(const std::string& path, int flags) : fd_(::open(path.c_str(), flags | O_CLOEXEC)) {
    if (fd_ < 0) throw RuntimeError("cannot open '" + path + "': " + std::strerror(errno));
  }
  ~OpenFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

void pwrite_all(int fd, const unsigned char* data, uint64_t size, uint64_t offset,
                const std::string& path) {
  while (size > 0) {
    const ssize_t n = ::pwrite(fd, data, size, off_t(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw RuntimeError("cannot write '" + path + "': " + std::strerror(errno));
    // A write that moves nothing would loop here forever; no filesystem should answer so.
    if (n == 0) throw RuntimeError("cannot write '" + path + "': the write wrote 0 bytes");
    data += n;
    size -= uint64_t(n);
    offset += uint64_t(n);
  }
}

void pread_all(int fd, unsigned char* data, uint64_t size, uint64_t offset,
               const std::string& path) {
  while (size > 0) {
    const ssize_t n = ::pread(fd, data, size, off_t(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw RuntimeError("cannot read back '" + path + "': " + std::strerror(errno));
    if (n == 0) throw RuntimeError("'" + path + "' is shorter than HDF5 left it");
    data += n;
    size -= uint64_t(n);
    offset += uint64_t(n);
  }
}

}  // namespace

uint64_t rank_file_size_estimate(const std::array<uint64_t, 3>& tensor_bytes) {
  uint64_t end = kMetadataBlock;  // the datasets' headers, all in the first block
  for (const uint64_t bytes : tensor_bytes) {
    if (bytes >= kDatasetAlignment)
      end = (end + kDatasetAlignment - 1) / kDatasetAlignment * kDatasetAlignment;
    end += bytes;
  }
  return end + kTrailingMetadata;
}

std::array<TensorView, 3> tensor_views(const TrainingState& state, Slice slice) {
  std::array<TensorView, 3> views;
  const std::vector<float>* tensors[3] = {&state.params, &state.moment1, &state.moment2};
  const bool whole = slice.begin == 0 && slice.end == state.params.size();
  for (size_t i = 0; i < 3; ++i) {
    const std::vector<float>& tensor = *tensors[i];
    if (tensor.empty()) continue;
    if (whole) {
      views[i] = {tensor.data(), tensor.size()};
      continue;
    }
    if (slice.end > tensor.size() || slice.begin > slice.end)
      throw RuntimeError("a tensor of " + std::to_string(tensor.size()) +
                         " elements has no elements [" + std::to_string(slice.begin) + ", " +
                         std::to_string(slice.end) + ")");
    views[i] = {tensor.data() + slice.begin, size_t(slice.end - slice.begin)};
  }
  return views;
}

RankFileLayout lay_out_rank_file(const std::string& path, const std::array<TensorView, 3>& tensors,
                                 const CheckpointMeta& meta) {
  RankFileLayout layout;
  layout.path = path;
  haddr_t offsets[3] = {HADDR_UNDEF, HADDR_UNDEF, HADDR_UNDEF};
  {
    std::lock_guard<std::mutex> guard(hdf5_lock());
    Handle access{H5Pcreate(H5P_FILE_ACCESS), H5Pclose};
    check(H5Pset_fapl_sec2(access.id) >= 0, "sec2 driver");
    check(H5Pset_alignment(access.id, kDatasetAlignment, kDatasetAlignment) >= 0, "alignment");
    check(H5Pset_meta_block_size(access.id, kMetadataBlock) >= 0, "metadata block size");
    // The step folder is the job's alone (the folder lock); HDF5's own lock would fail on a
    // filesystem without flock.
    check(H5Pset_file_locking(access.id, false, true) >= 0, "file locking");
    Handle file{H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.id), H5Fclose};
    check(file.id >= 0, "cannot create '" + path + "'");
    for (size_t i = 0; i < 3; ++i)
      offsets[i] = allocate_dataset(file.id, kDatasetNames[i], tensors[i].size);
    write_attributes(file.id, meta);
    const hid_t id = std::exchange(file.id, -1);
    check(H5Fclose(id) >= 0, "cannot close '" + path + "'");
  }
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0)
    throw RuntimeError("cannot stat '" + path + "': " + std::strerror(errno));
  layout.size = uint64_t(info.st_size);
  for (size_t i = 0; i < 3; ++i) {
    const uint64_t bytes = uint64_t(tensors[i].size) * sizeof(float);
    if (bytes == 0) continue;
    if (offsets[i] == HADDR_UNDEF || offsets[i] > layout.size || bytes > layout.size - offsets[i])
      throw RuntimeError("HDF5 placed dataset " + std::string(kDatasetNames[i]) + " of '" + path +
                         "' outside the file");
    layout.extents.push_back(
        {offsets[i], reinterpret_cast<const unsigned char*>(tensors[i].data), bytes});
  }
  std::sort(layout.extents.begin(), layout.extents.end(),
            [](const auto& a, const auto& b) { return a.offset < b.offset; });
  for (size_t i = 1; i < layout.extents.size(); ++i)
    if (layout.extents[i - 1].offset + layout.extents[i - 1].bytes > layout.extents[i].offset)
      throw RuntimeError("HDF5 placed two datasets of '" + path + "' over each other");
  return layout;
}

RankFileData write_rank_file_data(const RankFileLayout& layout,
                                  const std::function<void()>& midway) {
  const std::string& path = layout.path;
  const OpenFile file(path, O_RDWR);
  reserve_file_space(file.fd(), layout.size, path);
  uint64_t data_bytes = 0;
  for (const auto& extent : layout.extents) data_bytes += extent.bytes;
  const uint64_t half = data_bytes / 2;
  bool midway_done = !midway;
  uint64_t written = 0;

  DigestBuilder digest;
  std::vector<unsigned char> read_back(kReadBackPiece);
  uint64_t hashed = 0;  // the file is hashed in file order up to here
  const auto hash_from_file = [&](uint64_t end) {
    while (hashed < end) {
      const uint64_t n = std::min<uint64_t>(read_back.size(), end - hashed);
      pread_all(file.fd(), read_back.data(), n, hashed, path);
      digest.add(read_back.data(), n);
      hashed += n;
    }
  };
  for (const auto& extent : layout.extents) {
    hash_from_file(extent.offset);  // metadata and padding before this dataset
    for (uint64_t done = 0; done < extent.bytes;) {
      if (!midway_done && written >= half) {
        midway();
        midway_done = true;
      }
      uint64_t n = std::min(kWritePiece, extent.bytes - done);
      if (!midway_done) n = std::min(n, half - written);
      pwrite_all(file.fd(), extent.data + done, n, extent.offset + done, path);
      start_writeback(file.fd(), extent.offset + done, n);
      digest.add(extent.data + done, n);
      done += n;
      written += n;
    }
    hashed = extent.offset + extent.bytes;
  }
  if (!midway_done) midway();
  hash_from_file(layout.size);

  RankFileData result;
  result.checksum = digest.finish().hex();
  const auto before = std::chrono::steady_clock::now();
  if (::fsync(file.fd()) != 0) throw RuntimeError("fsync '" + path + "': " + std::strerror(errno));
  result.fsync_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count();
  return result;
}

}  // namespace tp
