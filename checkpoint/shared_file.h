#pragma once
// The `shared-file` layout: one HDF5 file per checkpoint, created collectively through MPI-IO
// (parallel HDF5). Datasets `params`, `moment1` and `moment2` hold the whole state, contiguous and
// placed at creation; once the file is closed, each rank writes and reads back only its own slice
// of them, with positioned POSIX I/O at the datasets' offsets, straight from and into the state.
#include <mpi.h>

#include <functional>
#include <string>

#include "checkpoint/slices.h"
#include "checkpoint/state.h"

namespace tp {

// What a collective write left on this rank.
struct SharedWrite {
  double layout_s = 0;      // the collective create and close, and rank 0's reservation
  double write_s = 0;       // this rank's pwrites of its slabs, fsync excluded
  double flush_s = 0;       // this rank's fsync of its slabs
  std::string checksum;     // xxh3-128 of this rank's slab (params, moment1, moment2), as written
  uint64_t bytes = 0;       // the bytes of this rank's slab
  std::string problem;      // "" or this rank's first failure, naming the file and the error
  bool any_failed = false;  // some rank has a problem (this one, or another)
};

// Collective over `comm`. `state` is the whole state (every rank holds a replica); this rank
// writes its `slice` of every tensor, straight from `state`, with no copy. `meta.total_elements`
// is the full tensor length. The slab is fsynced by this rank before this returns.
// The collective part (create the file and datasets, write the attributes, close) is made by
// every rank whatever fails where: the ranks agree after each step, skip the rest together, and
// every rank closes the datasets and the file before they agree on the outcome. Then rank 0
// reserves the space of the datasets (a full disk fails there, on one rank, before any data is
// written), the ranks agree, and each writes and fsyncs its slabs on its own. The caller agrees
// on `problem` across ranks. `midway` runs after the first dataset's slab is written (where a
// ckpt-write fault strikes).
SharedWrite write_shared_checkpoint(const std::string& path, MPI_Comm comm,
                                    const TrainingState& state, Slice slice,
                                    const CheckpointMeta& meta,
                                    const std::function<void()>& midway = {});

// Collective over `comm`. Reads this rank's `slice` of every tensor into the same elements of
// `whole` (its tensors sized to `meta.total_elements` first; already so when they are the model's
// buffers, which costs nothing) and the file's attributes into `meta`, in one pass that also
// hashes the bytes read: returns the xxh3-128 of the slab (as slab_checksum of the slice would).
// The rest of `whole` is left as it was. A damaged file throws RuntimeError naming `path`; every
// rank still closes the file, so no rank is left waiting in a collective.
std::string read_shared_checkpoint(const std::string& path, MPI_Comm comm, Slice slice,
                                   TrainingState& whole, CheckpointMeta& meta);
// As read_shared_checkpoint, for several slabs of another world size's file (a restore at another
// size reads every slab that covers its new share): each slab's checksum, in the order given.
// Every rank calls it once, with its own list (which may be empty).
std::vector<std::string> read_shared_slabs(const std::string& path, MPI_Comm comm,
                                           const std::vector<Slice>& slabs, TrainingState& whole,
                                           CheckpointMeta& meta);

}  // namespace tp
