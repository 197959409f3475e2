#include "checkpoint/shared_file.h"

#include <hdf5.h>
#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "checkpoint/hashed_io.h"
#include "checkpoint/storage_space.h"
#include "common/digest.h"
#include "common/errors.h"
#include "common/hdf5_lock.h"
#include "common/hdf5_util.h"
#include "mpi/check.h"

namespace tp {
namespace {

// See docs/checkpoint.md: a page on a local filesystem; a parallel filesystem would want its
// stripe size (and the preflight's estimate would grow by three of them).
constexpr hsize_t kDatasetAlignment = 4096;

using h5::check;
using h5::Handle;
using h5::read_int_attribute;
using h5::read_string_attribute;
using h5::write_attribute;

hid_t mpio_access(MPI_Comm comm) {
  const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL);
  // Newest format: every metadata block carries a checksum, so damage to it is detected on open.
  H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
  // Every dataset starts on a page: a rank's writes never share a page with the metadata.
  H5Pset_alignment(fapl, kDatasetAlignment, kDatasetAlignment);
  return fapl;
}

// The innermost entry of HDF5's error stack: the most specific reason a call failed.
std::string hdf5_error_text() {
  std::string innermost;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_DOWNWARD,
      [](unsigned, const H5E_error2_t* entry, void* data) -> herr_t {
        if (entry->desc != nullptr && entry->desc[0] != '\0')
          *static_cast<std::string*>(data) = entry->desc;
        return 0;
      },
      &innermost);
  return innermost.empty() ? "HDF5 gives no reason" : innermost;
}

// Throws RuntimeError naming `what` and HDF5's reason unless `ok`.
void require(bool ok, const std::string& what) {
  if (!ok) throw RuntimeError(what + ": " + hdf5_error_text());
}

// Dataset creation is collective: every rank calls it with the same arguments. The space is
// placed at creation (contiguous, so H5Dget_offset names where each slab goes) and never filled:
// every byte is about to be written by its rank.
hid_t create_dataset(hid_t file, const char* name, uint64_t total, const std::string& path) {
  const hsize_t dims[1] = {total};
  Handle space{H5Screate_simple(1, dims, nullptr), H5Sclose};
  Handle create{H5Pcreate(H5P_DATASET_CREATE), H5Pclose};
  H5Pset_layout(create.id, H5D_CONTIGUOUS);
  H5Pset_alloc_time(create.id, H5D_ALLOC_TIME_EARLY);
  H5Pset_fill_time(create.id, H5D_FILL_TIME_NEVER);
  const hid_t set =
      H5Dcreate2(file, name, H5T_IEEE_F32LE, space.id, H5P_DEFAULT, create.id, H5P_DEFAULT);
  require(set >= 0, "cannot create dataset " + std::string(name) + " in '" + path + "'");
  return set;
}

// Rank 0 allocates the blocks the datasets will occupy (everything up to the end of the last), so
// that a full disk is found before any rank writes data.
void reserve_datasets(const std::string& path, uint64_t end) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw RuntimeError("cannot open '" + path + "': " + std::strerror(errno));
  try {
    reserve_file_space(fd, end, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

// Every rank learns whether any rank has a problem.
bool any_rank_failed(MPI_Comm comm, bool failed) {
  int flag = failed ? 1 : 0;
  mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &flag, 1, MPI_INT, MPI_LOR, comm));
  return flag != 0;
}

constexpr const char* kTensorNames[3] = {"params", "moment1", "moment2"};

// Where HDF5 placed each tensor's dataset in the file; moment2 is absent without Adam.
struct Placement {
  uint64_t offset[3] = {0, 0, 0};
  bool present[3] = {false, false, false};
  uint64_t end = 0;  // the end of the last dataset
};

std::vector<float>* tensor(TrainingState& state, size_t i) {
  return i == 0 ? &state.params : i == 1 ? &state.moment1 : &state.moment2;
}
const std::vector<float>* tensor(const TrainingState& state, size_t i) {
  return i == 0 ? &state.params : i == 1 ? &state.moment1 : &state.moment2;
}

uint64_t dataset_offset(hid_t set, const char* name, const std::string& path) {
  const haddr_t offset = H5Dget_offset(set);
  require(offset != HADDR_UNDEF,
          "dataset " + std::string(name) + " in '" + path + "' has no place in the file");
  return uint64_t(offset);
}

// Closes a descriptor on every way out.
struct Descriptor {
  int fd = -1;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
  void close(const std::string& path) {
    if (::close(std::exchange(fd, -1)) != 0)
      throw RuntimeError("cannot close '" + path + "': " + std::strerror(errno));
  }
};

// Collective: creates the file and its datasets, writes the attributes and closes the file, on
// every rank whatever fails where. Returns where the datasets lie; `any_failed` tells whether
// some rank has a problem (this rank's is in `problem`).
Placement create_collectively(const std::string& path, MPI_Comm comm, const CheckpointMeta& meta,
                              bool with_moment2, std::string& problem, bool& any_failed) {
  std::lock_guard<std::mutex> guard(hdf5_lock());
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // failures become messages, not printed stacks
  // Runs `step` unless a rank has failed before, then has every rank learn whether one has now.
  const auto collectively = [&](const std::function<void()>& step) {
    if (any_failed) return;
    try {
      step();
    } catch (const RuntimeError& e) {
      problem = e.what();
    }
    any_failed = any_rank_failed(comm, !problem.empty());
  };
  Placement placed;
  Handle fapl{mpio_access(comm), H5Pclose};
  Handle file{H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.id), H5Fclose};
  collectively([&] { require(file.id >= 0, "cannot create '" + path + "'"); });
  const uint64_t totals[3] = {meta.total_elements, meta.total_elements,
                              with_moment2 ? meta.total_elements : 0};
  Handle sets[3] = {{-1, H5Dclose}, {-1, H5Dclose}, {-1, H5Dclose}};
  for (size_t i = 0; i < 3; ++i)
    collectively([&] { sets[i].id = create_dataset(file.id, kTensorNames[i], totals[i], path); });
  collectively([&] {
    write_attribute(file.id, "step", meta.step);
    write_attribute(file.id, "world_size", int64_t(meta.world_size));
    write_attribute(file.id, "scenario_hash", meta.scenario_hash);
    write_attribute(file.id, "layout", meta.layout);
    write_attribute(file.id, "total_elements", int64_t(meta.total_elements));
    write_attribute(file.id, "format", std::string("trainproof.checkpoint/1"));
  });
  collectively([&] {
    for (size_t i = 0; i < 3; ++i) {
      if (totals[i] == 0) continue;
      placed.present[i] = true;
      placed.offset[i] = dataset_offset(sets[i].id, kTensorNames[i], path);
      placed.end = std::max(placed.end, placed.offset[i] + totals[i] * sizeof(float));
    }
  });
  // Every rank closes what it opened, in the same order, whatever failed: the closes are
  // collective too. Only then do the ranks agree, once more, on the outcome.
  for (size_t i = 3; i-- > 0;)
    if (sets[i].id >= 0) H5Dclose(std::exchange(sets[i].id, -1));
  if (file.id >= 0 && H5Fclose(std::exchange(file.id, -1)) < 0 && problem.empty())
    problem = "cannot close '" + path + "': " + hdf5_error_text();
  any_failed = any_rank_failed(comm, any_failed || !problem.empty());
  return placed;
}

// This rank's slab of every tensor, straight from the state at the datasets' offsets, hashed on
// the way, then fsynced. Returns the slab's checksum.
std::string write_slab(const std::string& path, const TrainingState& state, Slice slice,
                       const Placement& placed, const std::function<void()>& midway,
                       double& fsync_s) {
  Descriptor file{::open(path.c_str(), O_WRONLY | O_CLOEXEC)};
  if (file.fd < 0) throw RuntimeError("cannot open '" + path + "': " + std::strerror(errno));
  DigestBuilder digest;
  for (size_t i = 0; i < 3; ++i) {
    const std::vector<float>& values = *tensor(state, i);
    if (!placed.present[i] || values.empty()) continue;
    write_hashed(file.fd, path, placed.offset[i] + slice.begin * sizeof(float),
                 values.data() + slice.begin, slice.size() * sizeof(float), digest);
    if (i == 0 && midway) midway();
  }
  const auto before = std::chrono::steady_clock::now();
  if (::fsync(file.fd) != 0)
    throw RuntimeError("cannot fsync '" + path + "': " + std::strerror(errno));
  fsync_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count();
  file.close(path);
  return digest.finish().hex();
}

}  // namespace

SharedWrite write_shared_checkpoint(const std::string& path, MPI_Comm comm,
                                    const TrainingState& state, Slice slice,
                                    const CheckpointMeta& meta,
                                    const std::function<void()>& midway) {
  int rank = 0;
  mpiCheck(MPI_Comm_rank(comm, &rank));
  SharedWrite result;
  bool any_failed = false;
  const auto seconds_since = [](std::chrono::steady_clock::time_point since) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
  };
  const auto start = std::chrono::steady_clock::now();
  const Placement placed =
      create_collectively(path, comm, meta, !state.moment2.empty(), result.problem, any_failed);
  const double create_s = seconds_since(start);
  if (!any_failed) {
    try {
      if (rank == 0) reserve_datasets(path, placed.end);
    } catch (const RuntimeError& e) {
      result.problem = e.what();
    }
    any_failed = any_rank_failed(comm, !result.problem.empty());
  }
  const double reserve_s = seconds_since(start) - create_s;
  // From here on no rank makes a collective call: a failure is this rank's, and the caller's
  // agreement makes it every rank's.
  result.layout_s = seconds_since(start);
  if (!any_failed) {
    try {
      result.checksum = write_slab(path, state, slice, placed, midway, result.flush_s);
      result.write_s = seconds_since(start) - result.layout_s - result.flush_s;
      result.bytes = slice.size() * sizeof(float) * (state.moment2.empty() ? 2 : 3);
    } catch (const RuntimeError& e) {
      result.problem = e.what();
    }
  }
  result.any_failed = any_failed || !result.problem.empty();
  spdlog::debug(
      "save {}: create and close {:.3f} s, reserve {:.3f} s, slab {:.3f} s (fsync {:.3f} s)", path,
      create_s, reserve_s, seconds_since(start) - create_s - reserve_s, result.flush_s);
  return result;
}

namespace {

// Where this rank's slab of dataset `i` lies, checked against what a raw read assumes: a
// contiguous dataset of little-endian fp32 that reaches the slice's end. Absent (moment2 without
// Adam) when the dataset has no elements.
void locate(hid_t file, size_t i, Slice slice, const std::string& path, Placement& placed) {
  const char* name = kTensorNames[i];
  Handle set{H5Dopen2(file, name, H5P_DEFAULT), H5Dclose};
  check(set.id >= 0, path + ": no dataset " + name);
  Handle space{H5Dget_space(set.id), H5Sclose};
  const hssize_t n = H5Sget_simple_extent_npoints(space.id);
  if (i == 2 && n == 0) return;
  check(n >= 0 && uint64_t(n) >= slice.end, path + ": dataset " + name + " is too short");
  Handle type{H5Dget_type(set.id), H5Tclose};
  check(type.id >= 0 && H5Tequal(type.id, H5T_IEEE_F32LE) > 0,
        path + ": dataset " + name + " is not little-endian fp32");
  Handle create{H5Dget_create_plist(set.id), H5Pclose};
  check(create.id >= 0 && H5Pget_layout(create.id) == H5D_CONTIGUOUS,
        path + ": dataset " + name + " is not contiguous");
  const haddr_t offset = H5Dget_offset(set.id);
  check(offset != HADDR_UNDEF, path + ": dataset " + name + " has no data");
  placed.present[i] = true;
  placed.offset[i] = uint64_t(offset);
}

}  // namespace

std::vector<std::string> read_shared_slabs(const std::string& path, MPI_Comm comm,
                                           const std::vector<Slice>& slabs, TrainingState& whole,
                                           CheckpointMeta& meta) {
  Slice reach{0, 0};  // the span every slab lies in, for the datasets' length check
  for (const Slice& slab : slabs) reach.end = std::max(reach.end, slab.end);
  Placement placed;
  {
    std::lock_guard<std::mutex> guard(hdf5_lock());
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    Handle fapl{mpio_access(comm), H5Pclose};
    Handle file{H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.id), H5Fclose};
    check(file.id >= 0, path + ": not a readable HDF5 checkpoint");
    for (size_t i = 0; i < 3; ++i) locate(file.id, i, reach, path, placed);
    meta.total_elements = uint64_t(read_int_attribute(file.id, "total_elements", path));
    meta.step = read_int_attribute(file.id, "step", path);
    meta.world_size = int(read_int_attribute(file.id, "world_size", path));
    meta.scenario_hash = read_string_attribute(file.id, "scenario_hash", path);
    meta.layout = read_string_attribute(file.id, "layout", path);
  }  // closed (collectively) here, on every rank: the slabs are read with POSIX I/O
  if (reach.end > meta.total_elements)
    throw RuntimeError(path + " holds " + std::to_string(meta.total_elements) +
                       " elements per tensor, fewer than the slab's end " +
                       std::to_string(reach.end));
  whole.step = meta.step;
  if (!slabs.empty()) {
    meta.slice_begin = slabs.front().begin;
    meta.slice_end = slabs.back().end;
  }
  Descriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) throw RuntimeError("cannot open '" + path + "': " + std::strerror(errno));
  for (size_t i = 0; i < 3; ++i)
    if (placed.present[i]) {
      tensor(whole, i)->resize(meta.total_elements);
    } else {
      tensor(whole, i)->clear();
    }
  std::vector<std::string> checksums;
  for (const Slice& slab : slabs) {
    DigestBuilder digest;  // one slab's tensors in dataset order, as the writer hashed them
    for (size_t i = 0; i < 3; ++i) {
      if (!placed.present[i]) continue;
      std::vector<float>& values = *tensor(whole, i);
      read_hashed(file.fd, path, placed.offset[i] + slab.begin * sizeof(float),
                  values.data() + slab.begin, slab.size() * sizeof(float), digest);
    }
    checksums.push_back(digest.finish().hex());
  }
  file.close(path);
  return checksums;
}

std::string read_shared_checkpoint(const std::string& path, MPI_Comm comm, Slice slice,
                                   TrainingState& whole, CheckpointMeta& meta) {
  return read_shared_slabs(path, comm, {slice}, whole, meta).front();
}

}  // namespace tp
