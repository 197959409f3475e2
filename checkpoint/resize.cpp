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
  if (meta.step != manifest.step)
    return path + " holds step " + std::to_string(meta.step) + "; the manifest says step " +
           std::to_string(manifest.step);
  return "";
}

}  // namespace

std::string CheckpointStore::read_resized(const std::string& folder,
                                          const CheckpointManifest& manifest, uint64_t total,
                                          TrainingState& mine, uint64_t& bytes) const {
  const int old_size = manifest.world_size, rank = world_.rank, size = world_.size;
  const Slice wanted = rank_slice(total, rank, size);
  const bool replicas = manifest.layout != "shared-file" && !manifest.shard_optimizer;
  if (replicas) {
    // Every file is a whole replica: this rank verifies files rank, rank + size, ... (at least
    // one, so a larger world reads some twice) and keeps the first.
    for (int j = rank % old_size, first = 1; j < old_size; j += size, first = 0) {
      TrainingState state;
      CheckpointMeta meta;
      if (std::string why = read_verified(folder, manifest, size_t(j), options_.cold_read,
                                          first ? mine : state, meta, bytes);
          !why.empty())
        return why;
      if (rank >= old_size) break;
    }
    return "";
  }
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
  if (meta.step != manifest.step)
    return path + " holds step " + std::to_string(meta.step) + "; the manifest says step " +
           std::to_string(manifest.step);
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
