#include "checkpoint/store.h"

#include <fcntl.h>
#include <mpi.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "checkpoint/hdf5_image.h"
#include "common/digest.h"
#include "common/errors.h"
#include "common/sysinfo.h"
#include "mpi/check.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kFormat = "trainproof.checkpoint/1";

std::string rank_file(int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank-%05d.h5", rank);
  return name;
}

void fsync_path(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) throw RuntimeError("cannot open '" + path + "' to fsync: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw RuntimeError("fsync '" + path + "': " + std::strerror(errno));
}

// One write and one fsync; returns the fsync seconds.
double write_durably(const std::string& path, const void* data, size_t size,
                     const AlignedClock& clock) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw RuntimeError("cannot create '" + path + "': " + std::strerror(errno));
  const auto* bytes = static_cast<const char*>(data);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, bytes + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw RuntimeError("write '" + path + "': " + why);
    }
    done += size_t(n);
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

bool read_whole(const std::string& path, std::vector<unsigned char>& out, std::string& why) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    why = "cannot open " + path;
    return false;
  }
  in.seekg(0, std::ios::end);
  out.resize(size_t(in.tellg()));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(out.data()), std::streamsize(out.size()));
  if (!in) {
    why = "cannot read " + path;
    return false;
  }
  return true;
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

std::string CheckpointStore::folder_name(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return name;
}

CheckpointStore::CheckpointStore(std::string dir, int keep, bool cold_read, const World& world,
                                 std::string scenario_hash, const AlignedClock& clock)
    : dir_(std::move(dir)),
      keep_(keep),
      cold_read_(cold_read),
      world_(world),
      scenario_hash_(std::move(scenario_hash)),
      clock_(clock) {}

void CheckpointStore::preflight() {
  std::string problem;
  const std::string probe = dir_ + "/.preflight-rank-" + std::to_string(world_.rank);
  try {
    std::error_code ec;
    if (world_.rank == 0) fs::create_directories(dir_, ec);
    mpiCheck(MPI_Barrier(world_.comm));
    if (!fs::is_directory(dir_)) throw RuntimeError("it is not a folder that exists");
    const char byte = 1;
    write_durably(probe, &byte, 1, clock_);
    fs::remove(probe);
  } catch (const RuntimeError& e) {
    problem =
        "checkpoint.dir '" + dir_ + "' is not usable on host " + world_.host + ": " + e.what();
  }
  if (const std::string first = first_problem(world_, problem); !first.empty())
    throw UsageError(first);
}

CheckpointSave CheckpointStore::save(const TrainingState& state) {
  const std::string final_dir = dir_ + "/" + folder_name(state.step);
  const std::string partial = final_dir + ".partial";
  if (world_.rank == 0) {
    fs::remove_all(partial);  // a stale one from a crash never counts and is replaced
    fs::create_directories(partial);
  }
  mpiCheck(MPI_Barrier(world_.comm));

  const CheckpointMeta meta{state.step, world_.size, world_.rank, scenario_hash_, "file-per-rank"};
  const std::vector<unsigned char> image = encode_checkpoint_image(state, meta);
  const std::string checksum = digest_of(image.data(), image.size()).hex();
  const double start = clock_.now();
  const double fsync_s =
      write_durably(partial + "/" + rank_file(world_.rank), image.data(), image.size(), clock_);
  const double end = clock_.now();

  const std::vector<double> figures =
      gather_at_root(world_, {double(image.size()), start, end, fsync_s});
  const std::vector<std::string> checksums = gather_strings_at_root(world_, checksum);
  CheckpointSave save;
  save.step = state.step;
  if (world_.rank == 0) {
    const double commit_start = clock_.now();
    json manifest{{"format", kFormat},         {"step", state.step},
                  {"world_size", world_.size}, {"scenario_hash", scenario_hash_},
                  {"layout", "file-per-rank"}, {"created", utc_timestamp()},
                  {"files", json::array()}};
    save.first_start = figures[1];
    save.last_end = figures[2];
    for (int r = 0; r < world_.size; ++r) {
      const double* f = &figures[size_t(r) * 4];
      manifest["files"].push_back({{"name", rank_file(r)},
                                   {"rank", r},
                                   {"bytes", uint64_t(f[0])},
                                   {"xxh3_128", checksums[r]}});
      save.bytes += uint64_t(f[0]);
      save.first_start = std::min(save.first_start, f[1]);
      save.last_end = std::max(save.last_end, f[2]);
      save.rank_gbps.push_back(f[2] > f[1] ? f[0] / (f[2] - f[1]) / 1e9 : 0.0);
      save.max_fsync_s = std::max(save.max_fsync_s, f[3]);
    }
    const std::string text = manifest.dump(2) + "\n";
    write_durably(partial + "/MANIFEST.json", text.data(), text.size(), clock_);
    fsync_path(partial, O_RDONLY | O_DIRECTORY);
    // A fresh run over an old folder commits a step that exists already: the old copy is moved
    // aside, not deleted, until the new one is in place.
    const std::string replaced = final_dir + ".replaced";
    std::error_code ec;
    fs::remove_all(replaced, ec);
    if (fs::exists(final_dir)) fs::rename(final_dir, replaced);
    fs::rename(partial, final_dir);
    fsync_path(dir_, O_RDONLY | O_DIRECTORY);
    fs::remove_all(replaced, ec);
    save.commit_s = clock_.now() - commit_start;
    retain(state.step);
  }
  mpiCheck(MPI_Barrier(world_.comm));
  return save;
}

std::vector<std::pair<int64_t, std::string>> CheckpointStore::committed() const {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
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
    if (++kept <= size_t(keep_)) continue;
    std::error_code ec;
    fs::remove_all(folder, ec);
  }
}

std::optional<CheckpointRestore> CheckpointStore::restore(TrainingState& state) {
  std::vector<std::pair<int64_t, std::string>> candidates;
  if (world_.rank == 0) candidates = committed();
  CheckpointRestore result;
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
      if (writers != world_.size)
        throw UsageError("checkpoint " + folder + " was written by " + std::to_string(writers) +
                         " ranks; this run has " + std::to_string(world_.size) +
                         " (resharding is not supported)");
      if (hash != scenario_hash_)
        throw UsageError("checkpoint " + folder + " has scenario hash " + hash +
                         "; this run's is " + scenario_hash_ +
                         " (a model, seed, optimizer, batch or dtype option differs)");
    }

    // Every rank reads its own file once, verifies size and checksum, then decodes the buffer.
    const double start = clock_.local_now();
    std::vector<unsigned char> image;
    if (problem.empty()) {
      const json entry = manifest.value("files", json::array()).size() > size_t(world_.rank)
                             ? manifest["files"][size_t(world_.rank)]
                             : json::object();
      const std::string path = folder + "/" + entry.value("name", rank_file(world_.rank));
      std::string why;
      if (cold_read_) drop_page_cache(path);
      if (!read_whole(path, image, why)) {
        problem = why;
      } else if (image.size() != entry.value("bytes", uint64_t(0))) {
        problem = path + " has " + std::to_string(image.size()) + " bytes; the manifest says " +
                  std::to_string(entry.value("bytes", uint64_t(0)));
      } else if (digest_of(image.data(), image.size()).hex() != entry.value("xxh3_128", "")) {
        problem = path + " fails its xxh3-128 checksum";
      } else {
        try {
          CheckpointMeta meta;
          decode_checkpoint_image(image, path, state, meta);
        } catch (const RuntimeError& e) {
          problem = e.what();
        }
      }
    }
    const double seconds = clock_.local_now() - start;
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
    double slowest = seconds;
    uint64_t bytes = image.size();
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
