#pragma once
// The `shared-file` layout: one HDF5 file per checkpoint, written collectively through MPI-IO
// (parallel HDF5). Datasets `params`, `moment1` and `moment2` hold the whole state; each rank
// writes and reads back only its own slice of them as a hyperslab.
#include <mpi.h>

#include <functional>
#include <string>

#include "checkpoint/slices.h"
#include "checkpoint/state.h"

namespace tp {

// Collective over `comm`. `mine` holds this rank's `slice` of every tensor; `meta.total_elements`
// is the full tensor length. The data is flushed (MPI_File_sync) before this returns; the result
// is the seconds that flush took.
// `midway` runs after the first dataset's slab is written (where a ckpt-write fault strikes).
// `with_moment2` is decided from the whole state, so that a rank whose slice is empty still makes
// the same collective calls as the others.
double write_shared_checkpoint(const std::string& path, MPI_Comm comm, const TrainingState& mine,
                               Slice slice, const CheckpointMeta& meta, bool with_moment2,
                               const std::function<void()>& midway = {});

// Collective over `comm`. Reads this rank's `slice` of every tensor into `mine` and the file's
// attributes into `meta`. A damaged file throws RuntimeError naming `path`; every rank still
// closes the file, so no rank is left waiting in a collective.
void read_shared_checkpoint(const std::string& path, MPI_Comm comm, Slice slice,
                            TrainingState& mine, CheckpointMeta& meta);

}  // namespace tp
