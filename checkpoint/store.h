#pragma once
// The checkpoint store, file-per-rank layout, and its durable commit protocol (DESIGN.md):
//   1. every rank writes <dir>/step-NNNNNNNN.partial/rank-RRRRR.h5 with one write and one fsync,
//      and reports its size and xxh3-128 checksum to rank 0;
//   2. rank 0 writes MANIFEST.json (world size, step, scenario hash, files, sizes, checksums);
//   3. it fsyncs, renames the folder to step-NNNNNNNN/ and fsyncs the parent folder.
// Only a renamed folder with a manifest is a checkpoint; older ones are deleted only after a newer
// one is committed. Restore verifies every file before using any, and falls back past damage.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/compute_backend.h"
#include "mpi/clock_sync.h"
#include "mpi/world.h"

namespace tp {

struct CheckpointSave {
  int64_t step = 0;
  uint64_t bytes = 0;                    // all ranks
  double first_start = 0, last_end = 0;  // aligned clock, over ranks
  std::vector<double> rank_gbps;         // per rank: its bytes over its own write+fsync time
  double max_fsync_s = 0;
  double commit_s = 0;  // rank 0: manifest, renames and fsyncs
  double write_gbps() const {
    return last_end > first_start ? double(bytes) / (last_end - first_start) / 1e9 : 0.0;
  }
};

struct CheckpointRestore {
  int64_t step = 0;
  std::string folder;
  uint64_t bytes = 0;                 // all ranks
  double seconds = 0;                 // slowest rank: read, verify, decode
  std::vector<std::string> rejected;  // folders renamed *.corrupt, with the reason
  double gbps() const { return seconds > 0 ? double(bytes) / seconds / 1e9 : 0.0; }
};

class CheckpointStore {
 public:
  // `cold_read`: drop each file's cached pages before a restore reads it (posix_fadvise).
  CheckpointStore(std::string dir, int keep, bool cold_read, const World& world,
                  std::string scenario_hash, const AlignedClock& clock);

  // Writes, fsyncs and deletes a probe file; an unusable folder is a UsageError on every rank.
  void preflight();
  // Collective. Returns the figures on rank 0 (others get their own part).
  CheckpointSave save(const TrainingState& state);
  // Collective. The newest checkpoint whose every file verifies, or nullopt when none does.
  // A checkpoint of another world size or scenario is a UsageError naming both values.
  std::optional<CheckpointRestore> restore(TrainingState& state);

  static std::string folder_name(int64_t step);
  // Newest committed step in the folder (rank 0's view), or 0.
  int64_t newest_committed() const;

 private:
  std::vector<std::pair<int64_t, std::string>> committed() const;  // newest first
  void retain(int64_t newest);

  std::string dir_;
  int keep_;
  bool cold_read_;
  const World& world_;
  std::string scenario_hash_;
  const AlignedClock& clock_;
};

}  // namespace tp
