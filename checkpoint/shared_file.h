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

// What a collective write left on this rank.
struct SharedWrite {
  double flush_s = 0;       // the collective flush (MPI_File_sync)
  std::string problem;      // "" or this rank's first failure, naming the file and the error
  bool any_failed = false;  // some rank has a problem (this one, or another)
};

// Collective over `comm`. `mine` holds this rank's `slice` of every tensor; `meta.total_elements`
// is the full tensor length. The data is flushed (MPI_File_sync) before this returns.
// Every rank returns, and makes the same collective calls on the way, whatever fails where: the
// ranks agree after each step (creation, the space reservation, each slab, attributes, flush)
// and skip the rest together, and every rank closes the datasets and the file. Rank 0 reserves
// the space of the datasets before any data is written, so a full disk fails there, on one rank,
// outside the collective transfers. The caller agrees on `problem` across ranks.
// `midway` runs after the first dataset's slab is written (where a ckpt-write fault strikes).
// `with_moment2` is decided from the whole state, so that a rank whose slice is empty still makes
// the same collective calls as the others.
SharedWrite write_shared_checkpoint(const std::string& path, MPI_Comm comm,
                                    const TrainingState& mine, Slice slice,
                                    const CheckpointMeta& meta, bool with_moment2,
                                    const std::function<void()>& midway = {});

// Collective over `comm`. Reads this rank's `slice` of every tensor into `mine` and the file's
// attributes into `meta`. A damaged file throws RuntimeError naming `path`; every rank still
// closes the file, so no rank is left waiting in a collective.
void read_shared_checkpoint(const std::string& path, MPI_Comm comm, Slice slice,
                            TrainingState& mine, CheckpointMeta& meta);

}  // namespace tp
