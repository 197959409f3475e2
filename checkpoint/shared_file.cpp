#include "checkpoint/shared_file.h"

#include <hdf5.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <utility>

#include "checkpoint/storage_space.h"
#include "common/errors.h"
#include "common/hdf5_lock.h"
#include "common/hdf5_util.h"
#include "mpi/check.h"

namespace tp {
namespace {

using h5::check;
using h5::Handle;
using h5::read_int_attribute;
using h5::read_string_attribute;
using h5::write_attribute;

// Data transfers are collective: MPI-IO's two-phase aggregation turns the ranks' concurrent slab
// writes into a few large ones, where independent writes to one file contend for its lock (3x
// slower on a local filesystem). Every rank sees the same file, so checks before a transfer fail
// on all ranks alike and none is left waiting in it.
hid_t collective_transfer() {
  const hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
  H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
  return dxpl;
}

hid_t mpio_access(MPI_Comm comm) {
  const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL);
  // Newest format: every metadata block carries a checksum, so damage to it is detected on open.
  H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
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

// Dataset creation is collective: every rank calls it with the same arguments. Parallel HDF5
// allocates the space at creation and would first write fill values over all of it: every byte
// is about to be written by its rank, so that second pass is switched off.
hid_t create_dataset(hid_t file, const char* name, uint64_t total, const std::string& path) {
  const hsize_t dims[1] = {total};
  Handle space{H5Screate_simple(1, dims, nullptr), H5Sclose};
  Handle create{H5Pcreate(H5P_DATASET_CREATE), H5Pclose};
  H5Pset_fill_time(create.id, H5D_FILL_TIME_NEVER);
  const hid_t set =
      H5Dcreate2(file, name, H5T_IEEE_F32LE, space.id, H5P_DEFAULT, create.id, H5P_DEFAULT);
  require(set >= 0, "cannot create dataset " + std::string(name) + " in '" + path + "'");
  return set;
}

void write_slab(hid_t set, const char* name, Slice slice, const std::vector<float>& mine,
                hid_t dxpl, const std::string& path) {
  Handle space{H5Dget_space(set), H5Sclose};
  if (H5Sget_simple_extent_npoints(space.id) == 0) return;  // no second moment: nothing to write
  const hsize_t count[1] = {slice.size()};
  Handle memory{H5Screate_simple(1, count, nullptr), H5Sclose};
  h5::select_slab(space.id, memory.id, slice.begin, slice.size());
  if (H5Dwrite(set, H5T_NATIVE_FLOAT, memory.id, space.id, dxpl, mine.data()) >= 0) return;
  // HDF5 does not pass the errno of a failed MPI-IO write on; where the space reservation could
  // not be made, the free space is the likeliest clue.
  std::string why = "cannot write the slab of dataset " + std::string(name) + " to '" + path +
                    "': " + hdf5_error_text();
  try {
    why += " (its filesystem has " + std::to_string(free_bytes(path)) + " bytes free)";
  } catch (const RuntimeError&) {
  }
  throw RuntimeError(why);
}

// Rank 0 allocates the blocks the datasets will occupy (everything up to the end of the last), so
// that a full disk is found before any rank writes data.
void reserve_datasets(const std::string& path, std::initializer_list<hid_t> sets) {
  uint64_t end = 0;
  for (const hid_t set : sets) {
    const haddr_t offset = H5Dget_offset(set);
    if (offset != HADDR_UNDEF) end = std::max<uint64_t>(end, offset + H5Dget_storage_size(set));
  }
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

void read_slab(hid_t file, const char* name, Slice slice, std::vector<float>& mine, hid_t dxpl,
               const std::string& what) {
  Handle set{H5Dopen2(file, name, H5P_DEFAULT), H5Dclose};
  check(set.id >= 0, what + ": no dataset " + name);
  Handle space{H5Dget_space(set.id), H5Sclose};
  const hssize_t n = H5Sget_simple_extent_npoints(space.id);
  check(n >= 0 && uint64_t(n) >= slice.end, what + ": dataset " + name + " is too short");
  mine.resize(slice.size());
  const hsize_t count[1] = {slice.size()};
  Handle memory{H5Screate_simple(1, count, nullptr), H5Sclose};
  h5::select_slab(space.id, memory.id, slice.begin, slice.size());
  check(H5Dread(set.id, H5T_NATIVE_FLOAT, memory.id, space.id, dxpl, mine.data()) >= 0,
        what + ": cannot read the slab of dataset " + name);
}

}  // namespace

SharedWrite write_shared_checkpoint(const std::string& path, MPI_Comm comm,
                                    const TrainingState& mine, Slice slice,
                                    const CheckpointMeta& meta, bool with_moment2,
                                    const std::function<void()>& midway) {
  std::lock_guard<std::mutex> guard(hdf5_lock());
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // failures become messages, not printed stacks
  int rank = 0;
  mpiCheck(MPI_Comm_rank(comm, &rank));
  SharedWrite result;
  bool any_failed = false;
  // Runs `step` unless a rank has failed before, then has every rank learn whether one has now.
  const auto collectively = [&](const std::function<void()>& step) {
    if (any_failed) return;
    try {
      step();
    } catch (const RuntimeError& e) {
      result.problem = e.what();
    }
    any_failed = any_rank_failed(comm, !result.problem.empty());
  };

  Handle fapl{mpio_access(comm), H5Pclose};
  Handle dxpl{collective_transfer(), H5Pclose};
  Handle file{H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.id), H5Fclose};
  collectively([&] { require(file.id >= 0, "cannot create '" + path + "'"); });
  const uint64_t total2 = with_moment2 ? meta.total_elements : 0;
  Handle params{-1, H5Dclose}, moment1{-1, H5Dclose}, moment2{-1, H5Dclose};
  collectively([&] { params.id = create_dataset(file.id, "params", meta.total_elements, path); });
  collectively([&] { moment1.id = create_dataset(file.id, "moment1", meta.total_elements, path); });
  collectively([&] { moment2.id = create_dataset(file.id, "moment2", total2, path); });
  collectively([&] {
    if (rank == 0) reserve_datasets(path, {params.id, moment1.id, moment2.id});
  });
  collectively([&] { write_slab(params.id, "params", slice, mine.params, dxpl.id, path); });
  if (!any_failed && midway) midway();
  collectively([&] { write_slab(moment1.id, "moment1", slice, mine.moment1, dxpl.id, path); });
  collectively([&] {
    write_slab(moment2.id, "moment2", with_moment2 ? slice : Slice{}, mine.moment2, dxpl.id, path);
  });
  collectively([&] {
    write_attribute(file.id, "step", meta.step);
    write_attribute(file.id, "world_size", int64_t(meta.world_size));
    write_attribute(file.id, "scenario_hash", meta.scenario_hash);
    write_attribute(file.id, "layout", meta.layout);
    write_attribute(file.id, "total_elements", int64_t(meta.total_elements));
    write_attribute(file.id, "format", std::string("trainproof.checkpoint/1"));
  });
  // Collective; the MPI-IO driver turns it into MPI_File_sync, which reaches storage.
  collectively([&] {
    const auto before = std::chrono::steady_clock::now();
    require(H5Fflush(file.id, H5F_SCOPE_GLOBAL) >= 0, "cannot flush '" + path + "'");
    result.flush_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count();
  });
  // Every rank closes what it opened, in the same order, whatever failed: the closes are
  // collective too.
  for (Handle* set : {&moment2, &moment1, &params})
    if (set->id >= 0) H5Dclose(std::exchange(set->id, -1));
  if (file.id >= 0 && H5Fclose(std::exchange(file.id, -1)) < 0 && result.problem.empty())
    result.problem = "cannot close '" + path + "': " + hdf5_error_text();
  result.any_failed = any_failed || !result.problem.empty();
  return result;
}

void read_shared_checkpoint(const std::string& path, MPI_Comm comm, Slice slice,
                            TrainingState& mine, CheckpointMeta& meta) {
  std::lock_guard<std::mutex> guard(hdf5_lock());
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  Handle fapl{mpio_access(comm), H5Pclose};
  Handle dxpl{collective_transfer(), H5Pclose};
  Handle file{H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.id), H5Fclose};
  check(file.id >= 0, path + ": not a readable HDF5 checkpoint");
  read_slab(file.id, "params", slice, mine.params, dxpl.id, path);
  read_slab(file.id, "moment1", slice, mine.moment1, dxpl.id, path);
  meta.total_elements = uint64_t(read_int_attribute(file.id, "total_elements", path));
  {
    Handle set{H5Dopen2(file.id, "moment2", H5P_DEFAULT), H5Dclose};
    Handle space{set.id >= 0 ? H5Dget_space(set.id) : -1, H5Sclose};
    const bool present = space.id >= 0 && H5Sget_simple_extent_npoints(space.id) > 0;
    if (present)
      read_slab(file.id, "moment2", slice, mine.moment2, dxpl.id, path);
    else
      mine.moment2.clear();
  }
  meta.step = read_int_attribute(file.id, "step", path);
  mine.step = meta.step;
  meta.world_size = int(read_int_attribute(file.id, "world_size", path));
  meta.scenario_hash = read_string_attribute(file.id, "scenario_hash", path);
  meta.layout = read_string_attribute(file.id, "layout", path);
  meta.slice_begin = slice.begin;
  meta.slice_end = slice.end;
}

}  // namespace tp
