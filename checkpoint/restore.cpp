// The restore side of the checkpoint store: the newest checkpoint whose every byte verifies, read
// into this rank's part of the state, falling back past damage (docs/checkpoint.md, "Restore").
#include <mpi.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/hdf5_image.h"
#include "checkpoint/mapped_file.h"
#include "checkpoint/shared_file.h"
#include "checkpoint/slices.h"
#include "checkpoint/store.h"
#include "common/errors.h"
#include "mpi/check.h"

namespace tp {

namespace fs = std::filesystem;
using nlohmann::json;

std::string CheckpointStore::read_rank_file(const std::string& folder, const json& manifest,
                                            Slice slice, TrainingState& mine,
                                            uint64_t& bytes) const {
  const json files = manifest.value("files", json::array());
  const json entry = files.is_array() && files.size() > size_t(world_.rank)
                         ? files[size_t(world_.rank)]
                         : json::object();
  if (entry.empty()) return "MANIFEST.json lists no file for rank " + std::to_string(world_.rank);
  const std::string path = folder + "/" + entry.value("name", rank_checkpoint_file(world_.rank));
  const uint64_t expected = entry.value("bytes", uint64_t(0));
  if (options_.cold_read) drop_page_cache(path);
  MappedFile image;
  std::string why;
  const double t0 = clock_.local_now();
  if (!image.map_and_hash(path, why)) return why;
  const double t1 = clock_.local_now();
  bytes = image.size();
  if (image.size() != expected)
    return path + " has " + std::to_string(image.size()) + " bytes; the manifest says " +
           std::to_string(expected);
  if (image.checksum() != entry.value("xxh3_128", "")) return path + " fails its xxh3-128 checksum";
  CheckpointMeta meta;
  try {
    decode_checkpoint_image(image.data(), image.size(), path, mine, meta);
  } catch (const RuntimeError& e) {
    return e.what();
  }
  spdlog::debug("restore {}: read+hash {:.3f} s, decode {:.3f} s", path, t1 - t0,
                clock_.local_now() - t1);
  if (meta.slice_begin != slice.begin || meta.slice_end != slice.end)
    return path + " holds elements " + elements_text(meta.slice_begin, meta.slice_end) + "; rank " +
           std::to_string(world_.rank) + " needs " + elements_text(slice.begin, slice.end);
  return "";
}

std::string CheckpointStore::read_shared_slab(const std::string& folder, const json& manifest,
                                              Slice slice, TrainingState& mine,
                                              uint64_t& bytes) const {
  const json files = manifest.value("files", json::array());
  const json entry = files.is_array() && !files.empty() ? files[0] : json::object();
  const std::string path = folder + "/" + entry.value("name", std::string(kSharedCheckpointFile));
  const json& slabs = entry.contains("slabs") ? entry["slabs"] : json::array();
  // Size and manifest are checked on every rank and agreed on before the collective open, so a
  // damaged folder never leaves one rank inside HDF5 while the others have moved on.
  std::string problem;
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec)
    problem = "cannot open " + path + ": " + ec.message();
  else if (size != entry.value("bytes", uint64_t(0)))
    problem = path + " has " + std::to_string(size) + " bytes; the manifest says " +
              std::to_string(entry.value("bytes", uint64_t(0)));
  else if (!slabs.is_array() || slabs.size() != size_t(world_.size))
    problem = "MANIFEST.json does not list one slab per rank";
  problem = first_problem(world_, problem);
  if (!problem.empty()) return problem;

  if (options_.cold_read) drop_page_cache(path);
  CheckpointMeta meta;
  const double read_start = clock_.local_now();
  try {
    read_shared_checkpoint(path, world_.comm, slice, mine, meta);
  } catch (const RuntimeError& e) {
    return e.what();
  }
  bytes = state_bytes(mine);
  spdlog::debug("restore {}: slab of {} bytes read in {:.3f} s", path, bytes,
                clock_.local_now() - read_start);
  const json& slab = slabs[size_t(world_.rank)];
  if (slab.value("elements", json::array()) != json{slice.begin, slice.end})
    return path + ": the manifest's slab for rank " + std::to_string(world_.rank) +
           " is not elements " + elements_text(slice.begin, slice.end);
  if (slab_checksum(mine) != slab.value("xxh3_128", ""))
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

    std::string manifest_text;
    if (world_.rank == 0) {
      std::ifstream in(folder + "/MANIFEST.json");
      std::stringstream buffer;
      buffer << in.rdbuf();
      manifest_text = buffer.str();
    }
    manifest_text = broadcast_from_root(world_, manifest_text);
    std::string problem;
    json manifest;
    try {
      manifest = json::parse(manifest_text);
      if (manifest.value("format", "") != kCheckpointFormat)
        problem = "MANIFEST.json has an unknown format";
    } catch (const json::exception& e) {
      problem = std::string("MANIFEST.json does not parse: ") + e.what();
    }
    if (problem.empty()) {
      const int writers = manifest.value("world_size", -1);
      const std::string hash = manifest.value("scenario_hash", "");
      const std::string written = layout_label(manifest.value("layout", "") == "shared-file"
                                                   ? CheckpointLayout::shared_file
                                                   : CheckpointLayout::file_per_rank,
                                               manifest.value("shard_optimizer", false));
      if (writers != world_.size)
        throw UsageError("checkpoint " + folder + " was written by " + std::to_string(writers) +
                         " ranks; this run has " + std::to_string(world_.size) +
                         " (resharding is not supported)");
      if (hash != scenario_hash_)
        throw UsageError("checkpoint " + folder + " has scenario hash " + hash +
                         "; this run's is " + scenario_hash_ +
                         " (a model, seed, optimizer, batch or dtype option differs)");
      if (written != label)
        throw UsageError("checkpoint " + folder + " was written with layout " + written +
                         "; this run asks for " + label +
                         " (set checkpoint.layout and checkpoint.shard_optimizer to match)");
    }

    // Every rank reads and verifies what it needs; nothing reaches the state until all agree.
    const double start = clock_.local_now();
    // The manifest is the same on every rank, so whatever it lacks fails on every rank alike.
    // One written before slices existed has no total: the whole replica is every rank's part.
    uint64_t total = 0;
    if (problem.empty()) {
      try {
        total = manifest.value("total_elements", state.params.size());
      } catch (const json::exception& e) {
        problem = std::string("MANIFEST.json: ") + e.what();
      }
    }
    const Slice slice = sliced() ? rank_slice(total, world_.rank, world_.size) : Slice{0, total};
    // A whole replica decodes straight into the caller's buffers (which the caller imports only
    // on success); a slice decodes apart and is assembled once every rank's slice verifies.
    TrainingState slice_state;
    TrainingState& mine = sliced() ? slice_state : state;
    uint64_t bytes = 0;
    if (problem.empty()) {
      try {
        problem = options_.layout == CheckpointLayout::shared_file
                      ? read_shared_slab(folder, manifest, slice, mine, bytes)
                      : read_rank_file(folder, manifest, slice, mine, bytes);
      } catch (const json::exception& e) {
        problem = folder + "/MANIFEST.json: " + e.what();
      }
    }
    const std::string first = first_problem(world_, problem);
    if (!first.empty()) {
      if (world_.rank == 0) {
        spdlog::warn("checkpoint {} is damaged ({}); renamed *.corrupt, trying the previous one",
                     folder, first);
        std::error_code ec;
        fs::rename(folder, folder + ".corrupt", ec);
      }
      result.rejected.push_back(folder + ": " + first);
      mpiCheck(MPI_Barrier(world_.comm));
      continue;
    }
    if (sliced()) {
      int with_moment2 = mine.moment2.empty() ? 0 : 1;
      mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &with_moment2, 1, MPI_INT, MPI_MAX, world_.comm));
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
    result.folder = folder;
    result.bytes = bytes;
    result.seconds = slowest;
    return result;
  }
}

}  // namespace tp
