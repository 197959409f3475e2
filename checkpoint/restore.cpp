// The restore side of the checkpoint store: the newest checkpoint whose every byte verifies, read
// into this rank's part of the state, falling back past damage (docs/checkpoint.md, "Restore").
#include <mpi.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "checkpoint/hdf5_image.h"
#include "checkpoint/manifest.h"
#include "checkpoint/mapped_file.h"
#include "checkpoint/shared_file.h"
#include "checkpoint/slices.h"
#include "checkpoint/store.h"
#include "common/errors.h"
#include "mpi/check.h"

namespace tp {
namespace {

namespace fs = std::filesystem;

// A manifest lists a few hundred bytes per rank; anything far larger is not one, and is not read
// into memory and broadcast.
constexpr uint64_t kLargestManifest = uint64_t(64) << 20;

// Rank 0's read of MANIFEST.json, through the opened step folder: "" with `text`, or what is wrong.
std::string read_manifest_text(const std::string& folder, std::string& text) {
  const CheckpointFolder step(folder);
  std::string why;
  const ReadOnlyFile file = step.open_file("MANIFEST.json", why);
  if (!file.is_open()) return why;
  const std::string path = step.path_of("MANIFEST.json");
  if (file.size() > kLargestManifest)
    return path + " has " + std::to_string(file.size()) + " bytes; a manifest is not that large";
  text.resize(size_t(file.size()));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(file.fd(), &text[done], text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return "cannot read " + path + ": " + std::strerror(errno);
    if (n == 0) break;
    done += size_t(n);
  }
  text.resize(done);
  return "";
}

// Collective. The folder's manifest, parsed and type-checked alike on every rank; "" or what is
// wrong with it.
std::string load_manifest(const World& world, const std::string& folder,
                          CheckpointManifest& manifest) {
  std::string text;
  const std::string unread =
      first_problem(world, world.rank == 0 ? read_manifest_text(folder, text) : "");
  text = broadcast_from_root(world, text);
  if (!unread.empty()) return unread;
  return parse_manifest(text, fs::path(folder).filename().string(), manifest);
}

// A manifest that contradicts the run is not damage: it is the wrong run, and a fallback would
// silently restore an older state of another scenario. Every rank throws alike.
void refuse_another_run(const std::string& folder, const CheckpointManifest& manifest,
                        int world_size, const std::string& scenario_hash, const std::string& label,
                        bool allow_resize) {
  const std::string written =
      layout_label(manifest.layout == "shared-file" ? CheckpointLayout::shared_file
                                                    : CheckpointLayout::file_per_rank,
                   manifest.shard_optimizer);
  if (manifest.world_size != world_size && !allow_resize)
    throw UsageError("checkpoint " + folder + " was written by " +
                     std::to_string(manifest.world_size) + " ranks; this run has " +
                     std::to_string(world_size) +
                     " (set checkpoint.allow_resize=true to restore it at this size)");
  if (manifest.scenario_hash != scenario_hash)
    throw UsageError("checkpoint " + folder + " has scenario hash " + manifest.scenario_hash +
                     "; this run's is " + scenario_hash +
                     " (a model, seed, optimizer, batch or dtype option differs)");
  if (written != label)
    throw UsageError("checkpoint " + folder + " was written with layout " + written +
                     "; this run asks for " + label +
                     " (set checkpoint.layout and checkpoint.shard_optimizer to match)");
}

// Renames a damaged folder out of the way: `*.corrupt`, or `*.corrupt.N` when an earlier restore
// set a folder of that step aside already. Returns the new name, or "" when it cannot be renamed.
std::string set_aside(const std::string& folder) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string target = folder + ".corrupt";
    if (attempt > 0) target += '.' + std::to_string(attempt);
    std::error_code ec;
    if (fs::exists(fs::symlink_status(target, ec))) continue;
    fs::rename(folder, target, ec);
    if (!ec) return target;
    spdlog::warn("cannot rename {} to {}: {}", folder, target, ec.message());
    return "";
  }
  return "";
}

}  // namespace

ReadOnlyFile CheckpointStore::open_shared_file(const CheckpointFolder& step,
                                               const ManifestFile& entry,
                                               std::string& problem) const {
  ReadOnlyFile file = step.open_file(entry.name, problem);
  if (file.is_open() && file.size() != entry.bytes)
    problem = step.path_of(entry.name) + " has " + std::to_string(file.size()) +
              " bytes; the manifest says " + std::to_string(entry.bytes);
  problem = first_problem(world_, problem);
  return file;
}

std::string CheckpointStore::read_rank_file(const std::string& folder,
                                            const CheckpointManifest& manifest, Slice slice,
                                            TrainingState& mine, uint64_t& bytes) const {
  const ManifestFile& entry = manifest.files[size_t(world_.rank)];
  const CheckpointFolder step(folder);
  const std::string path = step.path_of(entry.name);
  std::string why;
  const ReadOnlyFile file = step.open_file(entry.name, why);
  if (!file.is_open()) return why;
  if (options_.cold_read) drop_page_cache(file);
  MappedFile image;
  const double t0 = clock_.local_now();
  if (!image.map_and_hash(file, path, why)) return why;
  const double t1 = clock_.local_now();
  bytes = image.size();
  if (image.size() != entry.bytes)
    return path + " has " + std::to_string(image.size()) + " bytes; the manifest says " +
           std::to_string(entry.bytes);
  if (image.checksum() != entry.xxh3_128) return path + " fails its xxh3-128 checksum";
  CheckpointMeta meta;
  try {
    decode_checkpoint_image(image.data(), image.size(), path, mine, meta);
  } catch (const RuntimeError& e) {
    return e.what();
  }
  spdlog::debug("restore {}: read+hash {:.3f} s, decode {:.3f} s", path, t1 - t0,
                clock_.local_now() - t1);
  if (std::string differs = decoded_disagrees(path, meta.step, meta.total_elements, manifest);
      !differs.empty())
    return differs;
  if (meta.slice_begin != slice.begin || meta.slice_end != slice.end)
    return path + " holds elements " + elements_text(meta.slice_begin, meta.slice_end) + "; rank " +
           std::to_string(world_.rank) + " needs " + elements_text(slice.begin, slice.end);
  return "";
}

std::string CheckpointStore::read_shared_slab(const std::string& folder,
                                              const CheckpointManifest& manifest, Slice slice,
                                              TrainingState& mine, uint64_t& bytes) const {
  const ManifestFile& entry = manifest.files[0];
  const CheckpointFolder step(folder);
  const std::string path = step.path_of(entry.name);
  // MPI-IO opens it again by path; the identity check after the read makes sure that was the
  // file checked here.
  std::string problem;
  const ReadOnlyFile file = open_shared_file(step, entry, problem);
  if (!problem.empty()) return problem;

  if (options_.cold_read) drop_page_cache(file);
  CheckpointMeta meta;
  const double read_start = clock_.local_now();
  std::string checksum;  // taken as the slab is read: one pass over the bytes
  try {
    checksum = read_shared_checkpoint(path, world_.comm, slice, mine, meta);
  } catch (const RuntimeError& e) {
    return e.what();
  }
  bytes = slice.size() * sizeof(float) * (mine.moment2.empty() ? 2 : 3);
  spdlog::debug("restore {}: slab of {} bytes read in {:.3f} s", path, bytes,
                clock_.local_now() - read_start);
  if (!step.still_names(entry.name, file)) return path + " was replaced while it was read";
  if (std::string differs = decoded_disagrees(path, meta.step, meta.total_elements, manifest);
      !differs.empty())
    return differs;
  const ManifestSlab& slab = entry.slabs[size_t(world_.rank)];
  if (slab.begin != slice.begin || slab.end != slice.end)
    return path + ": the manifest's slab for rank " + std::to_string(world_.rank) +
           " is not elements " + elements_text(slice.begin, slice.end);
  if (checksum != slab.xxh3_128)
    return path + ": the slab of rank " + std::to_string(world_.rank) + " (elements " +
           elements_text(slice.begin, slice.end) + ") fails its xxh3-128 checksum";
  return "";
}

std::optional<CheckpointRestore> CheckpointStore::restore(TrainingState& state) {
  std::vector<std::pair<int64_t, std::string>> candidates;
  if (world_.rank == 0) candidates = committed();
  CheckpointRestore result;
  const std::string label = layout_label(options_.layout, options_.shard_optimizer);
  for (size_t next = 0;; ++next) {
    const std::string folder = broadcast_from_root(
        world_, world_.rank == 0 && next < candidates.size() ? candidates[next].second : "");
    if (folder.empty()) return std::nullopt;

    CheckpointManifest manifest;
    std::string problem = load_manifest(world_, folder, manifest);
    if (problem.empty()) {
      refuse_another_run(folder, manifest, world_.size, scenario_hash_, label,
                         options_.allow_resize);
      problem = ranks_not_covered(manifest);
    }
    const bool resized = problem.empty() && manifest.world_size != world_.size;

    // Every rank reads and verifies what it needs; nothing reaches the state until all agree.
    const double start = clock_.local_now();
    // One written before slices existed has no total: the whole replica is every rank's part.
    const uint64_t total = manifest.total_elements.value_or(state.params.size());
    const Slice slice = sliced() ? rank_slice(total, world_.rank, world_.size) : Slice{0, total};
    // A whole replica decodes straight into the caller's buffers (which the caller imports only
    // on success), as does a shared-file slab, into its own elements; a sharded rank file decodes
    // apart. Slices are assembled once every rank's slice verifies. At another world size a
    // replica is read whole by each rank, and slices into this rank's new share, compact.
    const bool shared = options_.layout == CheckpointLayout::shared_file;
    TrainingState slice_state;
    TrainingState& mine = sliced() && (!shared || resized) ? slice_state : state;
    uint64_t bytes = 0;
    damaged_replicas_.clear();
    if (problem.empty())
      problem = resized  ? read_resized(folder, manifest, total, mine, bytes)
                : shared ? read_shared_slab(folder, manifest, slice, mine, bytes)
                         : read_rank_file(folder, manifest, slice, mine, bytes);
    const std::string first = first_problem(world_, problem);
    if (!first.empty()) {
      if (world_.rank == 0) {
        const std::string aside = set_aside(folder);
        spdlog::warn("checkpoint {} is damaged ({}); {}, trying the previous one", folder, first,
                     aside.empty() ? "it could not be renamed" : "renamed " + aside);
      }
      result.rejected.push_back(folder + ": " + first);
      mpiCheck(MPI_Barrier(world_.comm));
      continue;
    }
    if (sliced()) {
      int with_moment2 = mine.moment2.empty() ? 0 : 1;
      mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &with_moment2, 1, MPI_INT, MPI_MAX, world_.comm));
      if (shared && !resized)
        assemble_in_place(world_, total, with_moment2 != 0, state);
      else
        assemble(world_, mine, total, with_moment2 != 0, state);
    }
    double slowest = clock_.local_now() - start;
    double rank_gbps[2] = {0, 0};  // min as -max, so one MPI_MAX reduction gives both
    rank_gbps[0] = slowest > 0 ? -double(bytes) / slowest / 1e9 : 0.0;
    rank_gbps[1] = -rank_gbps[0];
    mpiCheck(MPI_Allreduce(MPI_IN_PLACE, rank_gbps, 2, MPI_DOUBLE, MPI_MAX, world_.comm));
    result.rank_gbps_min = -rank_gbps[0];
    result.rank_gbps_max = rank_gbps[1];
    mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &slowest, 1, MPI_DOUBLE, MPI_MAX, world_.comm));
    mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &bytes, 1, MPI_UINT64_T, MPI_SUM, world_.comm));
    result.step = state.step;
    result.written_world_size = manifest.world_size;
    result.damaged_replicas = std::move(damaged_replicas_);
    for (const std::string& damage : result.damaged_replicas)
      spdlog::warn("checkpoint {}: a damaged replica, covered by another: {}", folder, damage);
    result.folder = folder;
    result.bytes = bytes;
    result.seconds = slowest;
    return result;
  }
}

}  // namespace tp
