#include "checkpoint/store.h"

#include <fcntl.h>
#include <mpi.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "checkpoint/rank_file.h"
#include "checkpoint/shared_file.h"
#include "checkpoint/slices.h"
#include "checkpoint/storage_space.h"
#include "common/digest.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/sysinfo.h"
#include "mpi/check.h"
#include "mpi/gather.h"

namespace tp {

namespace fs = std::filesystem;
using nlohmann::json;

// One rank's part of a save: what rank 0 needs for the manifest and the save's figures.
struct RankWrite {
  uint64_t bytes = 0;
  double start = 0, end = 0, fsync_s = 0;  // the aligned clock
  double serialize_s = 0, write_s = 0;     // laying out the file; writing it, fsync excluded
  uint64_t slice_begin = 0, slice_end = 0;
  std::string checksum;  // xxh3-128 of the rank's file or slab
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RankWrite, bytes, start, end, fsync_s, serialize_s, write_s,
                                   slice_begin, slice_end, checksum)

std::string rank_checkpoint_file(int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank-%05d.h5", rank);
  return name;
}

std::string layout_label(CheckpointLayout layout, bool shard_optimizer) {
  if (layout == CheckpointLayout::shared_file) return "shared-file";
  return shard_optimizer ? "file-per-rank+shard_optimizer" : "file-per-rank";
}

CheckpointLayout parse_layout(const std::string& text) {
  if (text == "file-per-rank") return CheckpointLayout::file_per_rank;
  if (text == "shared-file") return CheckpointLayout::shared_file;
  throw UsageError("checkpoint.layout must be file-per-rank or shared-file, got '" + text + "'");
}

std::string CheckpointStore::folder_name(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return name;
}

CheckpointStore::CheckpointStore(CheckpointOptions options, World world, std::string scenario_hash,
                                 const AlignedClock& clock)
    : options_(std::move(options)),
      world_(std::move(world)),
      scenario_hash_(std::move(scenario_hash)),
      clock_(clock) {}

void CheckpointStore::fault_point(int64_t step, const char* point) const {
  if (fault_hook_) fault_hook_(step, point);
}

bool CheckpointStore::sliced() const {
  return options_.layout == CheckpointLayout::shared_file || options_.shard_optimizer;
}

// A failure anywhere in a save is learned by every rank before the next collective call: the
// ranks agree, rank 0 deletes what the save wrote (its space is free again), and every rank throws
// the same EnvironmentError naming the host, the file and the error.
void CheckpointStore::agree_or_abandon(int64_t step, const std::string& problem,
                                       const std::string& partial) const {
  const std::string mine = problem.empty() ? problem
                                           : problem + " (rank " + std::to_string(world_.rank) +
                                                 " on host " + world_.host + ")";
  const std::string first = first_problem(world_, mine);
  if (first.empty()) return;
  if (world_.rank == 0) {
    std::error_code ec;
    fs::remove_all(partial, ec);
  }
  throw EnvironmentError("checkpoint " + folder_name(step) + " was not saved: " + first);
}

// This rank's part of a save, written and durable. RuntimeError names the file and the error;
// the shared file's collective calls are made on every rank whatever fails.
RankWrite CheckpointStore::write_part(const TrainingState& state, const std::string& partial) {
  const uint64_t total = state.params.size();
  const Slice slice = sliced() ? rank_slice(total, world_.rank, world_.size) : Slice{0, total};
  const std::string label = layout_label(options_.layout, options_.shard_optimizer);
  const CheckpointMeta meta{state.step, world_.size, world_.rank, scenario_hash_,
                            label,      slice.begin, slice.end,   total};
  RankWrite written;
  written.slice_begin = slice.begin;
  written.slice_end = slice.end;
  if (options_.layout == CheckpointLayout::file_per_rank) {
    // HDF5 writes the metadata; the data goes from the state's own buffers to the file.
    const double serialize_start = clock_.now();
    const RankFileLayout layout = lay_out_rank_file(
        partial + "/" + rank_checkpoint_file(world_.rank), tensor_views(state, slice), meta);
    written.serialize_s = clock_.now() - serialize_start;
    written.bytes = layout.size;
    // Writers start together, as a storage benchmark's jobs do; the aggregate bandwidth then
    // measures storage rather than the skew of the ranks' encoding.
    mpiCheck(MPI_Barrier(world_.comm));
    written.start = clock_.now();
    const RankFileData data =
        write_rank_file_data(layout, [&] { fault_point(state.step, "ckpt-write"); });
    written.end = clock_.now();
    written.checksum = data.checksum;
    written.fsync_s = data.fsync_s;
    written.write_s = written.end - written.start - data.fsync_s;
    return written;
  }
  // The slab is written straight from the state: no copy of it, and its checksum is taken on the
  // way out.
  const std::string path = partial + "/" + kSharedCheckpointFile;
  mpiCheck(MPI_Barrier(world_.comm));
  written.start = clock_.now();
  const SharedWrite shared = write_shared_checkpoint(
      path, world_.comm, state, slice, meta, [&] { fault_point(state.step, "ckpt-write"); });
  if (!shared.problem.empty()) throw RuntimeError(shared.problem);
  if (shared.any_failed) return written;  // another rank's problem; the agreement names it
  written.checksum = shared.checksum;
  written.bytes = shared.bytes;
  written.serialize_s = shared.layout_s;
  written.write_s = shared.write_s;
  written.fsync_s = shared.flush_s;
  written.end = clock_.now();
  spdlog::debug("save {}: slab of {} bytes written in {:.3f} s, of which {:.3f} s fsync", path,
                written.bytes, written.end - written.start, written.fsync_s);
  return written;
}

CheckpointSave CheckpointStore::save(const TrainingState& state) {
  const double save_start = clock_.now();
  const std::string final_dir = options_.dir + "/" + folder_name(state.step);
  const std::string partial = final_dir + ".partial";
  std::string problem;
  if (world_.rank == 0) {
    deletion_.wait();  // the previous save's deletions: room for this one
    std::error_code ec;
    fs::remove_all(partial, ec);  // a stale one from a crash never counts and is replaced
    if (!ec) fs::create_directories(partial, ec);
    if (ec) problem = "cannot create '" + partial + "': " + ec.message();
  }
  agree_or_abandon(state.step, problem, partial);

  RankWrite written;
  try {
    written = write_part(state, partial);
  } catch (const RuntimeError& e) {
    problem = e.what();
  }
  if (world_.rank != 0 && problem.empty()) fault_point(state.step, "ckpt-commit");
  agree_or_abandon(state.step, problem, partial);

  const std::vector<RankWrite> writes = gather_records_at_root(world_, written);
  CheckpointSave save;
  save.step = state.step;
  if (world_.rank == 0) {
    try {
      commit(state, writes, save);
    } catch (const RuntimeError& e) {
      problem = e.what();
    } catch (const fs::filesystem_error& e) {
      problem = e.what();
    }
    save.total_s = clock_.now() - save_start;
  }
  agree_or_abandon(state.step, problem, partial);
  return save;
}

// Rank 0: the manifest, the renames and fsyncs that commit the checkpoint, then retention.
void CheckpointStore::commit(const TrainingState& state, const std::vector<RankWrite>& writes,
                             CheckpointSave& save) {
  const std::string final_dir = options_.dir + "/" + folder_name(state.step);
  const std::string partial = final_dir + ".partial";
  const double commit_start = clock_.now();
  json manifest{{"format", kCheckpointFormat},
                {"step", state.step},
                {"world_size", world_.size},
                {"scenario_hash", scenario_hash_},
                {"layout", layout_label(options_.layout, false)},
                {"shard_optimizer", options_.shard_optimizer},
                {"total_elements", state.params.size()},
                {"created", utc_timestamp()},
                {"files", json::array()}};
  save.first_start = writes[0].start;
  save.last_end = writes[0].end;
  json slabs = json::array();
  for (int r = 0; r < world_.size; ++r) {
    const RankWrite& w = writes[size_t(r)];
    const json entry{{"rank", r},
                     {"bytes", w.bytes},
                     {"elements", {w.slice_begin, w.slice_end}},
                     {"xxh3_128", w.checksum}};
    if (options_.layout == CheckpointLayout::file_per_rank) {
      json file = entry;
      file["name"] = rank_checkpoint_file(r);
      manifest["files"].push_back(file);
      save.bytes += w.bytes;
    } else {
      slabs.push_back(entry);
    }
    save.first_start = std::min(save.first_start, w.start);
    save.last_end = std::max(save.last_end, w.end);
    save.rank_gbps.push_back(w.end > w.start ? double(w.bytes) / (w.end - w.start) / 1e9 : 0.0);
    save.max_fsync_s = std::max(save.max_fsync_s, w.fsync_s);
    save.serialize_s = std::max(save.serialize_s, w.serialize_s);
    save.write_s = std::max(save.write_s, w.write_s);
  }
  if (options_.layout == CheckpointLayout::shared_file) {
    save.bytes = uint64_t(fs::file_size(partial + "/" + kSharedCheckpointFile));
    manifest["files"].push_back(
        {{"name", kSharedCheckpointFile}, {"bytes", save.bytes}, {"slabs", slabs}});
  }
  if (manifest_extra_) manifest.update(manifest_extra_(state.step));
  const std::string text = manifest.dump(2) + "\n";
  write_durably(partial + "/MANIFEST.json", text.data(), text.size(), clock_);
  fsync_path(partial, O_RDONLY | O_DIRECTORY);
  fault_point(state.step, "ckpt-commit");
  // A fresh run over an old folder commits a step that exists already: the two folders are
  // exchanged in one atomic rename, so the step exists at every instant, and the old copy
  // (now under the .partial name, which never counts) is deleted after.
  std::error_code ec;
  if (fs::exists(final_dir)) {
    if (::renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) != 0)
      throw RuntimeError("cannot exchange " + partial + " and " + final_dir + ": " +
                         std::strerror(errno));
  } else {
    fs::rename(partial, final_dir);
  }
  fsync_path(options_.dir, O_RDONLY | O_DIRECTORY);
  fs::remove_all(partial, ec);
  save.commit_s = clock_.now() - commit_start;
  retain(state.step);
}

std::vector<std::pair<int64_t, std::string>> CheckpointStore::committed() const {
  return committed_in(options_.dir);
}

std::vector<std::pair<int64_t, std::string>> CheckpointStore::committed_in(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    long long step = 0;
    char tail = 0;
    // Exactly step-NNNNNNNN: .partial and .corrupt folders never count, nor one without manifest.
    if (std::sscanf(name.c_str(), "step-%lld%c", &step, &tail) != 1 || name != folder_name(step))
      continue;
    if (!fs::exists(entry.path() / "MANIFEST.json")) continue;
    found.emplace_back(step, entry.path().string());
  }
  std::sort(found.rbegin(), found.rend());
  return found;
}

int64_t CheckpointStore::newest_committed() const {
  const auto all = committed();
  return all.empty() ? 0 : all.front().first;
}

void CheckpointStore::retain(int64_t newest) {
  // Only checkpoints up to the one just committed count: later steps left by an earlier, longer
  // run are not this run's to delete, and the new one must never be the one removed.
  // Renamed here, so no longer counted as committed, and deleted beside training: unlinking a
  // large file costs a filesystem a fraction of the time writing it did, too long to stall for.
  size_t kept = 0;
  std::vector<std::string> doomed;
  for (const auto& [step, folder] : committed()) {
    if (step > newest) continue;
    if (++kept <= size_t(options_.keep)) continue;
    std::error_code ec;
    fs::rename(folder, folder + ".deleting", ec);
    if (!ec) doomed.push_back(folder + ".deleting");
  }
  deletion_.start(std::move(doomed));
}

}  // namespace tp
