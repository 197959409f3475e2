#include "checkpoint/shared_file.h"

#include <hdf5.h>

#include <chrono>
#include <mutex>

#include "common/errors.h"
#include "common/hdf5_lock.h"
#include "common/hdf5_util.h"

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

void write_slab(hid_t file, const char* name, uint64_t total, Slice slice,
                const std::vector<float>& mine, hid_t dxpl) {
  const hsize_t dims[1] = {total};
  Handle space{H5Screate_simple(1, dims, nullptr), H5Sclose};
  // Dataset creation is collective: every rank calls it with the same arguments. Parallel HDF5
  // allocates the space at creation and would first write fill values over all of it: every byte
  // is about to be written by its rank, so that second pass is switched off.
  Handle create{H5Pcreate(H5P_DATASET_CREATE), H5Pclose};
  H5Pset_fill_time(create.id, H5D_FILL_TIME_NEVER);
  Handle set{H5Dcreate2(file, name, H5T_IEEE_F32LE, space.id, H5P_DEFAULT, create.id, H5P_DEFAULT),
             H5Dclose};
  check(set.id >= 0, std::string("cannot create dataset ") + name);
  const hsize_t count[1] = {slice.size()};
  Handle memory{H5Screate_simple(1, count, nullptr), H5Sclose};
  h5::select_slab(space.id, memory.id, slice.begin, slice.size());
  if (total == 0) return;  // an empty dataset (no second moment) has nothing to write
  check(H5Dwrite(set.id, H5T_NATIVE_FLOAT, memory.id, space.id, dxpl, mine.data()) >= 0,
        std::string("cannot write the slab of dataset ") + name);
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

double write_shared_checkpoint(const std::string& path, MPI_Comm comm, const TrainingState& mine,
                               Slice slice, const CheckpointMeta& meta, bool with_moment2,
                               const std::function<void()>& midway) {
  std::lock_guard<std::mutex> guard(hdf5_lock());
  Handle fapl{mpio_access(comm), H5Pclose};
  Handle dxpl{collective_transfer(), H5Pclose};
  Handle file{H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.id), H5Fclose};
  check(file.id >= 0, "cannot create " + path);
  write_slab(file.id, "params", meta.total_elements, slice, mine.params, dxpl.id);
  if (midway) midway();
  write_slab(file.id, "moment1", meta.total_elements, slice, mine.moment1, dxpl.id);
  write_slab(file.id, "moment2", with_moment2 ? meta.total_elements : 0,
             with_moment2 ? slice : Slice{}, mine.moment2, dxpl.id);
  write_attribute(file.id, "step", meta.step);
  write_attribute(file.id, "world_size", int64_t(meta.world_size));
  write_attribute(file.id, "scenario_hash", meta.scenario_hash);
  write_attribute(file.id, "layout", meta.layout);
  write_attribute(file.id, "total_elements", int64_t(meta.total_elements));
  write_attribute(file.id, "format", std::string("trainproof.checkpoint/1"));
  // Collective; the MPI-IO driver turns it into MPI_File_sync, which reaches storage.
  const auto before = std::chrono::steady_clock::now();
  check(H5Fflush(file.id, H5F_SCOPE_GLOBAL) >= 0, "cannot flush " + path);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count();
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
