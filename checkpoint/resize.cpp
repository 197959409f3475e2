// Restore at another world size (docs/checkpoint.md, "Restore at another world size"): each rank
// of the new world reads the part of an N-rank checkpoint that covers its new share, verifying
// every file or slab it reads as a whole against the manifest before any of it is used.
#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "checkpoint/hdf5_image.h"
#include "checkpoint/manifest.h"
#include "checkpoint/mapped_file.h"
#include "checkpoint/shared_file.h"
#include "checkpoint/slices.h"
#include "checkpoint/store.h"
#include "common/errors.h"
#include "mpi/check.h"
#include "mpi/world.h"

namespace tp {
namespace {

bool overlaps(Slice a, Slice b) {
  return a.begin < b.end && b.begin < a.end;
}

// Copies the elements of `from` (which holds `held`) that fall in `into` (which holds `wanted`).
void copy_overlap(const TrainingState& from, Slice held, TrainingState& into, Slice wanted) {
  const uint64_t begin = std::max(held.begin, wanted.begin), end = std::min(held.end, wanted.end);
  if (begin >= end) return;
  const auto copy = [&](const std::vector<float>& src, std::vector<float>& dst) {
    if (src.empty()) return;
    dst.resize(wanted.size());
    std::copy(src.begin() + long(begin - held.begin), src.begin() + long(end - held.begin),
              dst.begin() + long(begin - wanted.begin));
  };
  copy(from.params, into.params);
  copy(from.moment1, into.moment1);
  copy(from.moment2, into.moment2);
}

// One rank file of the checkpoint, mapped, verified whole against the manifest and decoded.
std::string read_verified(const std::string& folder, const CheckpointManifest& manifest,
                          size_t index, bool cold, TrainingState& state, CheckpointMeta& meta,
                          uint64_t& bytes) {
  const ManifestFile& entry = manifest.files[index];
  const CheckpointFolder step(folder);
  const std::string path = step.path_of(entry.name);
  std::string why;
  const ReadOnlyFile file = step.open_file(entry.name, why);
  if (!file.is_open()) return why;
  if (cold) drop_page_cache(file);
  MappedFile image;
  if (!image.map_and_hash(file, path, why)) return why;
  bytes += image.size();
  if (image.size() != entry.bytes)
    return path + " has " + std::to_string(image.size()) + " bytes; the manifest says " +
           std::to_string(entry.bytes);
  if (image.checksum() != entry.xxh3_128) return path + " fails its xxh3-128 checksum";
  try {
    decode_checkpoint_image(image.data(), image.size(), path, state, meta);
  } catch (const RuntimeError& e) {
    return e.what();
  }
  if (std::string differs = decoded_disagrees(path, meta.step, meta.total_elements, manifest);
      !differs.empty())
    return differs;
  return "";
}

// Sends `state` from `root` to every rank, in pieces MPI's int counts can carry.
void broadcast_state(const World& world, int root, TrainingState& state) {
  uint64_t sizes[4] = {uint64_t(state.step), state.params.size(), state.moment1.size(),
                       state.moment2.size()};
  mpiCheck(MPI_Bcast(sizes, 4, MPI_UINT64_T, root, world.comm));
  state.step = int64_t(sizes[0]);
  std::vector<float>* tensors[3] = {&state.params, &state.moment1, &state.moment2};
  constexpr uint64_t kPiece = uint64_t(1) << 28;
  for (int t = 0; t < 3; ++t) {
    tensors[t]->resize(sizes[t + 1]);
    for (uint64_t at = 0; at < sizes[t + 1]; at += kPiece)
      mpiCheck(MPI_Bcast(tensors[t]->data() + at, int(std::min(kPiece, sizes[t + 1] - at)),
                         MPI_FLOAT, root, world.comm));
  }
}

}  // namespace

std::string CheckpointStore::read_any_replica(const std::string& folder,
                                              const CheckpointManifest& manifest,
                                              TrainingState& mine, uint64_t& bytes) {
  // Every file is a whole replica: this rank verifies files rank, rank + size, ... (at least one,
  // so a larger world reads some twice) and keeps the first that verifies. Any one valid replica
  // is the whole state; a damaged one is named in the report, and the checkpoint still counts.
  const int old_size = manifest.world_size, rank = world_.rank, size = world_.size;
  bool valid = false;
  std::string damage;
  for (int j = rank % old_size; j < old_size; j += size) {
    TrainingState state;
    CheckpointMeta meta;
    const std::string why = read_verified(folder, manifest, size_t(j), options_.cold_read,
                                          valid ? state : mine, meta, bytes);
    if (!why.empty()) damage += (damage.empty() ? "" : "\n") + why;
    valid = valid || why.empty();
    if (rank >= old_size) break;
  }
  // One reduction: the lowest rank holding a valid replica, and (negated, so that the minimum
  // says) whether any rank lacks one and whether any found damage.
  int agreed[3] = {valid ? rank : size, valid ? 0 : -1, damage.empty() ? 0 : -1};
  mpiCheck(MPI_Allreduce(MPI_IN_PLACE, agreed, 3, MPI_INT, MPI_MIN, world_.comm));
  const int holder = agreed[0];
  const bool some_lack = agreed[1] < 0, some_damaged = agreed[2] < 0;
  if (holder == size) return damage.empty() ? folder + ": no rank read a valid replica" : damage;
  if (some_lack) broadcast_state(world_, holder, mine);
  // Rank 0 lists every damaged replica; only a checkpoint with damage pays for the gather.
  if (some_damaged)
    for (const std::string& text : gather_strings_at_root(world_, damage))
      for (size_t start = 0; start < text.size();) {
        const size_t end = std::min(text.find('\n', start), text.size());
        damaged_replicas_.push_back(text.substr(start, end - start));
        start = end + 1;
      }
  // A larger world reads some files twice: each is named once.
  std::sort(damaged_replicas_.begin(), damaged_replicas_.end());
  damaged_replicas_.erase(std::unique(damaged_replicas_.begin(), damaged_replicas_.end()),
                          damaged_replicas_.end());
  return "";
}

std::string CheckpointStore::read_resized(const std::string& folder,
                                          const CheckpointManifest& manifest, uint64_t total,
                                          TrainingState& mine, uint64_t& bytes) {
  const int old_size = manifest.world_size, rank = world_.rank, size = world_.size;
  const Slice wanted = rank_slice(total, rank, size);
  const bool replicas = manifest.layout != "shared-file" && !manifest.shard_optimizer;
  if (replicas) return read_any_replica(folder, manifest, mine, bytes);
  mine = TrainingState{};
  mine.step = manifest.step;
  if (manifest.layout != "shared-file") {
    // Shards: every old rank's file whose slice meets this rank's new one.
    for (int j = 0; j < old_size; ++j) {
      const Slice held = rank_slice(total, j, old_size);
      if (!overlaps(held, wanted)) continue;
      TrainingState shard;
      CheckpointMeta meta;
      if (std::string why =
              read_verified(folder, manifest, size_t(j), options_.cold_read, shard, meta, bytes);
          !why.empty())
        return why;
      if (meta.slice_begin != held.begin || meta.slice_end != held.end)
        return folder + ": the file of rank " + std::to_string(j) + " holds elements " +
               elements_text(meta.slice_begin, meta.slice_end) + ", not " +
               elements_text(held.begin, held.end);
      copy_overlap(shard, held, mine, wanted);
    }
    return "";
  }
  // The shared file: every old slab that meets this rank's new share, read and verified whole.
  const ManifestFile& entry = manifest.files[0];
  const CheckpointFolder step(folder);
  const std::string path = step.path_of(entry.name);
  std::vector<Slice> slabs;
  std::vector<size_t> owners;
  for (size_t j = 0; j < entry.slabs.size(); ++j) {
    const Slice held{entry.slabs[j].begin, entry.slabs[j].end};
    if (overlaps(held, wanted)) {
      slabs.push_back(held);
      owners.push_back(j);
    }
  }
  std::string problem;
  const ReadOnlyFile file = open_shared_file(step, entry, problem);
  if (!problem.empty()) return problem;
  if (options_.cold_read) drop_page_cache(file);
  TrainingState whole;
  CheckpointMeta meta;
  std::vector<std::string> checksums;
  try {
    checksums = read_shared_slabs(path, world_.comm, slabs, whole, meta);
  } catch (const RuntimeError& e) {
    return e.what();
  }
  if (!step.still_names(entry.name, file)) return path + " was replaced while it was read";
  if (std::string differs = decoded_disagrees(path, meta.step, meta.total_elements, manifest);
      !differs.empty())
    return differs;
  for (size_t k = 0; k < slabs.size(); ++k) {
    bytes += slabs[k].size() * sizeof(float) * (whole.moment2.empty() ? 2 : 3);
    if (checksums[k] != entry.slabs[owners[k]].xxh3_128)
      return path + ": the slab written by rank " + std::to_string(owners[k]) + " (elements " +
             elements_text(slabs[k].begin, slabs[k].end) + ") fails its xxh3-128 checksum";
    copy_overlap(cut(whole, slabs[k]), slabs[k], mine, wanted);
  }
  return "";
}

}  // namespace tp

namespace tp {

int CheckpointStore::newest_world_size(const std::string& dir) {
  const auto committed = committed_in(dir);
  if (committed.empty()) return 0;
  std::ifstream in(committed.front().second + "/MANIFEST.json");
  const nlohmann::json manifest = nlohmann::json::parse(in, nullptr, false);
  if (!manifest.is_object() || !manifest.contains("world_size") ||
      !manifest["world_size"].is_number_integer())
    return 0;
  return manifest["world_size"].get<int>();
}

}  // namespace tp
