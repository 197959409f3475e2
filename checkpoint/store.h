#pragma once
// The checkpoint store and its durable commit protocol (docs/checkpoint.md):
//   1. every rank writes into <dir>/step-NNNNNNNN.partial/ and fsyncs, and reports its bytes and
//      xxh3-128 checksum to rank 0 (file-per-rank: one per file; shared-file: one per hyperslab);
//   2. rank 0 writes MANIFEST.json (world size, step, scenario hash, layout, files, checksums);
//   3. it fsyncs, renames the folder to step-NNNNNNNN/ and fsyncs the parent folder.
// Only a renamed folder with a manifest is a checkpoint; older ones are deleted only after a newer
// one is committed. Restore verifies every byte it uses before any of it reaches the state, and
// falls back past damage.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/background_deletion.h"
#include "checkpoint/folder_facts.h"
#include "checkpoint/folder_lock.h"
#include "checkpoint/mapped_file.h"
#include "checkpoint/slices.h"
#include "common/training_state.h"
#include "mpi/clock_sync.h"
#include "mpi/world.h"

namespace tp {

// MANIFEST.json's "format": a restore refuses any other.
inline constexpr const char* kCheckpointFormat = "trainproof.checkpoint/1";

enum class CheckpointLayout { file_per_rank, shared_file };
struct CheckpointManifest;  // checkpoint/manifest.h
struct ManifestFile;

struct CheckpointOptions {
  std::string dir;
  int keep = 2;
  bool cold_read = false;  // drop each file's cached pages before a restore reads it
  CheckpointLayout layout = CheckpointLayout::file_per_rank;
  // file-per-rank only: each rank writes a distinct slice of the state (ZeRO-1 style).
  bool shard_optimizer = false;
  // A checkpoint of another world size restores (docs/checkpoint.md, "Restore at another world
  // size"); false: it is a UsageError naming both sizes.
  bool allow_resize = false;
  // Another scenario's checkpoints in the folder are deleted at the preflight instead of refused.
  bool overwrite = false;
  // How long the preflight waits for another job's lock on the folder before giving up.
  double lock_wait_s = 60;
  // Rank 0: the folder's lock when this process holds it already (accept holds it for its whole
  // run): the preflight shares it instead of waiting for it. Null: the preflight takes it.
  std::shared_ptr<const FolderLock> held_lock;
  // Test-only: this rank looks for rank 0's probe in a folder of its own, as a rank on a host
  // with its own disk under the same path would.
  int test_unshared_rank = -1;
};

// "file-per-rank", "file-per-rank+shard_optimizer" or "shared-file": what a restore must match.
std::string layout_label(CheckpointLayout layout, bool shard_optimizer);
// The HDF5 files in a checkpoint folder: one per rank, or one shared by all.
std::string rank_checkpoint_file(int rank);
inline constexpr const char* kSharedCheckpointFile = "state.h5";
CheckpointLayout parse_layout(const std::string& text);  // UsageError names the value

// What the preflight checks the folder against.
struct PreflightPlan {
  uint64_t checkpoint_bytes = 0;  // one checkpoint, all ranks' files; 0: free space not checked
  bool fresh_start = false;       // --resume none: the run writes over what the folder holds
};

// One rank's part of a save (store.cpp).
struct RankWrite;

struct CheckpointSave {
  int64_t step = 0;
  uint64_t bytes = 0;                    // all ranks
  double first_start = 0, last_end = 0;  // aligned clock, over ranks: writes and fsyncs
  std::vector<double> rank_gbps;         // per rank: its bytes over its own write+fsync time
  double max_fsync_s = 0;
  double serialize_s = 0;  // slowest rank: HDF5 laying out its file (metadata, attributes)
  double write_s = 0;      // slowest rank: writing its bytes, before the fsync
  double commit_s = 0;     // rank 0: manifest, renames and fsyncs
  double total_s = 0;      // rank 0: from the start of the save to its commit
  double stall_s = 0;      // training's wait for this checkpoint; set by whoever drives the save
  double time_to_durable_s = 0;  // async: from the submit to the commit
  double write_gbps() const {
    return last_end > first_start ? double(bytes) / (last_end - first_start) / 1e9 : 0.0;
  }
};

struct CheckpointRestore {
  int64_t step = 0;
  std::string folder;
  uint64_t bytes = 0;                           // all ranks
  double seconds = 0;                           // slowest rank: read, verify, decode, assemble
  double rank_gbps_min = 0, rank_gbps_max = 0;  // each rank's bytes over its own seconds
  std::vector<std::string> rejected;            // folders renamed *.corrupt, with the reason
  // Replicas that failed verification in a restore at another world size, which another valid
  // replica covered (rank 0's list; docs/checkpoint.md).
  std::vector<std::string> damaged_replicas;
  int written_world_size = 0;  // the ranks that wrote it (this run's, or not)
  double gbps() const { return seconds > 0 ? double(bytes) / seconds / 1e9 : 0.0; }
};

class CheckpointStore {
 public:
  // `world` may be a duplicate communicator's view (the async writer's); the store keeps a copy.
  CheckpointStore(CheckpointOptions options, World world, std::string scenario_hash,
                  const AlignedClock& clock);

  // Collective, before anything else touches the folder (docs/checkpoint.md, "Preflight"):
  // rank 0 takes the folder's lock for the life of this store (another job holding it past
  // options.lock_wait_s is a UsageError naming its host and pid) and removes the leftovers of
  // earlier runs; every rank writes, fsyncs and deletes a probe file (an unusable folder, or one
  // some rank does not share, is a UsageError naming the host); another scenario's checkpoints
  // are refused on a fresh start, or deleted with options.overwrite; and the free space must
  // hold keep + 1 checkpoints. Returns the folder's facts (complete on rank 0).
  CheckpointFolderFacts preflight(const PreflightPlan& plan = {});
  // One checkpoint's size on disk, all ranks' files and the manifest, for a state of `elements`
  // values per tensor: an estimate that errs high by a few KiB per file.
  uint64_t expected_bytes(uint64_t elements, bool with_moment2) const;
  // Collective. Returns the figures on rank 0 (others get their own part).
  CheckpointSave save(const TrainingState& state);
  // Collective. The newest checkpoint whose every file verifies, or nullopt when none does.
  // A checkpoint of another world size, scenario or layout is a UsageError naming both values.
  std::optional<CheckpointRestore> restore(TrainingState& state);

  // Rank 0, after the preflight: the folder's lock, held while this store lives.
  const FolderLock& folder_lock() const { return lock_; }

  static std::string folder_name(int64_t step);
  // Newest committed step in the folder (rank 0's view), or 0.
  int64_t newest_committed() const;
  // The committed checkpoints in `dir` (step, folder), newest first: exactly step-NNNNNNNN
  // folders with a manifest (.partial, .corrupt and .deleting folders never count).
  static std::vector<std::pair<int64_t, std::string>> committed_in(const std::string& dir);
  // The world size the newest committed checkpoint in `dir` names in its manifest, or 0 when
  // there is none or it cannot be read (the restore itself then finds out why).
  static int newest_world_size(const std::string& dir);
  // Called at "ckpt-write" (midway through this rank's data) and "ckpt-commit" (data durable,
  // checksum not yet reported; on rank 0, manifest written and rename not yet done): the points
  // where a drill's kill faults strike.
  void set_fault_hook(std::function<void(int64_t step, const char* point)> hook) {
    fault_hook_ = std::move(hook);
  }
  // Extra manifest fields for a step, such as the data loader's position.
  void set_manifest_extra(std::function<nlohmann::json(int64_t step)> extra) {
    manifest_extra_ = std::move(extra);
  }

 private:
  bool sliced() const;
  void fault_point(int64_t step, const char* point) const;
  // Read and verify this rank's part of a checkpoint into `mine`; "" or what is wrong.
  std::string read_rank_file(const std::string& folder, const CheckpointManifest& manifest,
                             Slice slice, TrainingState& mine, uint64_t& bytes) const;
  std::string read_shared_slab(const std::string& folder, const CheckpointManifest& manifest,
                               Slice slice, TrainingState& mine, uint64_t& bytes) const;
  // A checkpoint of another world size (resize.cpp): this rank's new share of it read from
  // every file or slab that covers it, each verified whole, into `mine` (the whole replica when
  // the checkpoint holds replicas; else this rank's rank_slice of `total`, compact).
  std::string read_resized(const std::string& folder, const CheckpointManifest& manifest,
                           uint64_t total, TrainingState& mine, uint64_t& bytes);
  // Collective, replicas at another world size: any one valid replica is the whole state. Each
  // rank verifies its files; the lowest rank holding a valid one sends it to ranks without; the
  // damaged ones are listed in damaged_replicas_ on rank 0. A problem only when none is valid.
  std::string read_any_replica(const std::string& folder, const CheckpointManifest& manifest,
                               TrainingState& mine, uint64_t& bytes);
  // Collective: the shared file opened and its size checked on every rank, and agreed, before
  // the collective open, so a damaged folder never leaves one rank inside HDF5 while the others
  // have moved on. `problem` is every rank's first one ("" when the file can be read).
  ReadOnlyFile open_shared_file(const CheckpointFolder& step, const ManifestFile& entry,
                                std::string& problem) const;
  std::vector<std::pair<int64_t, std::string>> committed() const;  // newest first
  void retain(int64_t newest);
  RankWrite write_part(const TrainingState& state, const std::string& partial);
  void commit(const TrainingState& state, const std::vector<RankWrite>& writes,
              CheckpointSave& save);
  void agree_or_abandon(int64_t step, const std::string& problem, const std::string& partial) const;
  // Preflight steps on rank 0 (preflight.cpp); each returns "" or a problem for the agreement.
  std::string take_lock(CheckpointFolderFacts& facts);
  void remove_leftovers() const;
  void probe_from_every_rank() const;
  std::string check_scenarios(const PreflightPlan& plan, CheckpointFolderFacts& facts) const;
  std::string check_capacity(const PreflightPlan& plan) const;

  CheckpointOptions options_;
  World world_;
  std::string scenario_hash_;
  std::vector<std::string> damaged_replicas_;  // read_any_replica's, for the restore's result
  const AlignedClock& clock_;
  std::function<void(int64_t, const char*)> fault_hook_;
  std::function<nlohmann::json(int64_t)> manifest_extra_;
  FolderLock lock_;  // rank 0, from the preflight on
  // Rank 0: retention's deletions, run beside training; ends before the lock is released.
  BackgroundDeletion deletion_;
};

}  // namespace tp
