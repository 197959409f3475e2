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

#include "checkpoint/hdf5_image.h"
#include "checkpoint/shared_file.h"
#include "checkpoint/slices.h"
#include "common/digest.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/sysinfo.h"
#include "mpi/check.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kFormat = "trainproof.checkpoint/1";
// One write and one fsync; returns the fsync seconds. `midway`, when set, runs once half of the
// bytes are written (where a ckpt-write fault strikes).
double write_durably(const std::string& path, const void* data, size_t size,
                     const AlignedClock& clock, const std::function<void()>& midway = {}) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw RuntimeError("cannot create '" + path + "': " + std::strerror(errno));
  const auto* bytes = static_cast<const char*>(data);
  const size_t half = midway ? size / 2 : size;
  try {
    write_all(fd, bytes, half, path);
    if (midway) midway();
    write_all(fd, bytes + half, size - half, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  const double before = clock.local_now();
  const int rc = ::fsync(fd);
  const double fsync_s = clock.local_now() - before;
  ::close(fd);
  if (rc != 0) throw RuntimeError("fsync '" + path + "': " + std::strerror(errno));
  return fsync_s;
}

// Asks the kernel to drop the file's cached pages, so the read that follows measures storage
// rather than memory. The pages are clean (the file was fsynced), so nothing is lost.
void drop_page_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;  // the read below reports the missing file
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// A checkpoint file mapped read-only, with its xxh3-128. Mapping (rather than read() into a fresh
// buffer) saves a copy of every byte and the page faults of a buffer as large as the file; the
// checksum pass is what pulls the pages in, helped by sequential readahead. A file truncated by
// another process while mapped would raise SIGBUS: checkpoints are never modified in place.
class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(data_, size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  bool map_and_hash(const std::string& path, std::string& why) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) {
      why = "cannot open " + path + ": " + std::strerror(errno);
      return false;
    }
    struct stat info {};
    const bool ok = ::fstat(fd, &info) == 0;
    size_ = ok ? size_t(info.st_size) : 0;
    if (ok && size_ > 0) {
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
      void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      data_ = mapped == MAP_FAILED ? nullptr : static_cast<unsigned char*>(mapped);
    }
    const std::string error = std::strerror(errno);
    ::close(fd);
    if (!ok || (size_ > 0 && data_ == nullptr)) {
      why = "cannot map " + path + ": " + error;
      return false;
    }
    if (data_ != nullptr) ::madvise(data_, size_, MADV_WILLNEED);
    checksum_ = digest_of(data_, size_).hex();
    return true;
  }
  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& checksum() const { return checksum_; }

 private:
  unsigned char* data_ = nullptr;
  size_t size_ = 0;
  std::string checksum_;
};

uint64_t state_bytes(const TrainingState& s) {
  return (s.params.size() + s.moment1.size() + s.moment2.size()) * sizeof(float);
}

// One checksum over a slab of every tensor, in dataset order.
std::string slab_checksum(const TrainingState& mine) {
  DigestBuilder digest;
  digest.add_all(mine.params);
  digest.add_all(mine.moment1);
  digest.add_all(mine.moment2);
  return digest.finish().hex();
}

std::string elements_text(uint64_t begin, uint64_t end) {
  char text[64];
  std::snprintf(text, sizeof text, "[%llu, %llu)", static_cast<unsigned long long>(begin),
                static_cast<unsigned long long>(end));
  return text;
}

// Broadcasts a string from rank 0.
std::string broadcast(const World& world, std::string text) {
  int length = int(text.size());
  mpiCheck(MPI_Bcast(&length, 1, MPI_INT, 0, world.comm));
  text.resize(size_t(length));
  mpiCheck(MPI_Bcast(text.data(), length, MPI_CHAR, 0, world.comm));
  return text;
}

}  // namespace

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

CheckpointFolderFacts CheckpointStore::preflight() {
  std::string problem;
  const std::string& dir = options_.dir;
  const std::string probe = dir + "/.preflight-rank-" + std::to_string(world_.rank);
  // Rank 0 creates the folder first; a rank that still lacks it afterwards is on a host that does
  // not share it, creates its own, and is found out by the probe below.
  std::error_code ec;
  if (world_.rank == 0) fs::create_directories(dir, ec);
  mpiCheck(MPI_Barrier(world_.comm));
  if (world_.rank != 0) fs::create_directories(dir, ec);
  try {
    if (!fs::is_directory(dir)) throw RuntimeError("it is not a folder that exists");
    const char byte = 1;
    write_durably(probe, &byte, 1, clock_);
  } catch (const RuntimeError& e) {
    problem = "checkpoint.dir '" + dir + "' is not usable on host " + world_.host + ": " + e.what();
  }
  if (const std::string first = first_problem(world_, problem); !first.empty())
    throw UsageError(first);

  // Every probe is written: a rank that cannot see rank 0's sees another folder, where neither
  // its checkpoints would be committed nor a restore would find them. That is an error, found
  // now rather than at the first restore (which would set every checkpoint aside as damaged).
  const std::string seen = options_.test_unshared_rank == world_.rank ? dir + "/.unshared" : dir;
  const bool sees_rank0 = fs::exists(seen + "/.preflight-rank-0", ec);
  const std::string blind =
      sees_rank0 ? std::string()
                 : "checkpoint.dir '" + dir + "' on host " + world_.host +
                       " is not the folder rank 0 sees (rank 0's probe file is not there): "
                       "checkpoints need storage that every node shares";
  const std::string first = first_problem(world_, blind);
  fs::remove(probe, ec);
  if (!first.empty()) throw UsageError(first);

  CheckpointFolderFacts facts;
  facts.path = dir;
  facts.filesystem = filesystem_type(dir);
  return facts;
}

CheckpointSave CheckpointStore::save(const TrainingState& state) {
  const double save_start = clock_.now();
  const std::string final_dir = options_.dir + "/" + folder_name(state.step);
  const std::string partial = final_dir + ".partial";
  if (world_.rank == 0) {
    fs::remove_all(partial);  // a stale one from a crash never counts and is replaced
    fs::create_directories(partial);
  }
  mpiCheck(MPI_Barrier(world_.comm));

  const uint64_t total = state.params.size();
  const Slice slice = sliced() ? rank_slice(total, world_.rank, world_.size) : Slice{0, total};
  const std::string label = layout_label(options_.layout, options_.shard_optimizer);
  const CheckpointMeta meta{state.step, world_.size, world_.rank, scenario_hash_,
                            label,      slice.begin, slice.end,   total};
  uint64_t bytes = 0;
  std::string checksum;
  double start = 0, end = 0, fsync_s = 0;
  if (options_.layout == CheckpointLayout::file_per_rank) {
    const std::vector<unsigned char> image =
        encode_checkpoint_image(sliced() ? cut(state, slice) : state, meta);
    checksum = digest_of(image.data(), image.size()).hex();
    bytes = image.size();
    // Writers start together, as a storage benchmark's jobs do; the aggregate bandwidth then
    // measures storage rather than the skew of the ranks' encoding.
    mpiCheck(MPI_Barrier(world_.comm));
    start = clock_.now();
    fsync_s = write_durably(partial + "/" + rank_checkpoint_file(world_.rank), image.data(),
                            image.size(), clock_, [&] { fault_point(state.step, "ckpt-write"); });
    end = clock_.now();
  } else {
    const TrainingState mine = cut(state, slice);
    checksum = slab_checksum(mine);
    bytes = state_bytes(mine);
    const std::string path = partial + "/" + kSharedCheckpointFile;
    mpiCheck(MPI_Barrier(world_.comm));
    start = clock_.now();
    fsync_s = write_shared_checkpoint(path, world_.comm, mine, slice, meta, !state.moment2.empty(),
                                      [&] { fault_point(state.step, "ckpt-write"); });
    // MPI_File_sync made the data durable; this rank's own fsync also covers a filesystem whose
    // MPI-IO driver buffers on the client until close.
    fsync_path(path, O_RDONLY);
    end = clock_.now();
    spdlog::debug("save {}: slab of {} bytes written in {:.3f} s, of which {:.3f} s flush", path,
                  bytes, end - start, fsync_s);
  }

  if (world_.rank != 0) fault_point(state.step, "ckpt-commit");
  const std::vector<double> figures = gather_at_root(
      world_, {double(bytes), start, end, fsync_s, double(slice.begin), double(slice.end)});
  const std::vector<std::string> checksums = gather_strings_at_root(world_, checksum);
  constexpr size_t kFields = 6;
  CheckpointSave save;
  save.step = state.step;
  if (world_.rank == 0) {
    const double commit_start = clock_.now();
    json manifest{{"format", kFormat},
                  {"step", state.step},
                  {"world_size", world_.size},
                  {"scenario_hash", scenario_hash_},
                  {"layout", layout_label(options_.layout, false)},
                  {"shard_optimizer", options_.shard_optimizer},
                  {"total_elements", total},
                  {"created", utc_timestamp()},
                  {"files", json::array()}};
    save.first_start = figures[1];
    save.last_end = figures[2];
    json slabs = json::array();
    for (int r = 0; r < world_.size; ++r) {
      const double* f = &figures[size_t(r) * kFields];
      const json entry{{"rank", r},
                       {"bytes", uint64_t(f[0])},
                       {"elements", {uint64_t(f[4]), uint64_t(f[5])}},
                       {"xxh3_128", checksums[size_t(r)]}};
      if (options_.layout == CheckpointLayout::file_per_rank) {
        json file = entry;
        file["name"] = rank_checkpoint_file(r);
        manifest["files"].push_back(file);
        save.bytes += uint64_t(f[0]);
      } else {
        slabs.push_back(entry);
      }
      save.first_start = std::min(save.first_start, f[1]);
      save.last_end = std::max(save.last_end, f[2]);
      save.rank_gbps.push_back(f[2] > f[1] ? f[0] / (f[2] - f[1]) / 1e9 : 0.0);
      save.max_fsync_s = std::max(save.max_fsync_s, f[3]);
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
    save.total_s = clock_.now() - save_start;
  }
  mpiCheck(MPI_Barrier(world_.comm));
  return save;
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
  size_t kept = 0;
  for (const auto& [step, folder] : committed()) {
    if (step > newest) continue;
    if (++kept <= size_t(options_.keep)) continue;
    // Renamed first, so a deletion cut short leaves a folder that never counts as committed.
    const std::string doomed = folder + ".deleting";
    std::error_code ec;
    fs::rename(folder, doomed, ec);
    if (!ec) fs::remove_all(doomed, ec);
  }
}

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
    const std::string folder = broadcast(
        world_, world_.rank == 0 && next < candidates.size() ? candidates[next].second : "");
    if (folder.empty()) return std::nullopt;

    std::string manifest_text;
    if (world_.rank == 0) {
      std::ifstream in(folder + "/MANIFEST.json");
      std::stringstream buffer;
      buffer << in.rdbuf();
      manifest_text = buffer.str();
    }
    manifest_text = broadcast(world_, manifest_text);
    std::string problem;
    json manifest;
    try {
      manifest = json::parse(manifest_text);
      if (manifest.value("format", "") != kFormat) problem = "MANIFEST.json has an unknown format";
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
