#include "app/prepare_command.h"

#include <fcntl.h>
#include <mpi.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "app/cli/mpi_command.h"
#include "app/cli/option_values.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/sysinfo.h"
#include "data/dataset.h"
#include "mpi/check.h"
#include "mpi/world.h"

namespace tp {
namespace {

namespace fs = std::filesystem;

DatasetSpec spec_from(const TrainConfig& cfg) {
  DatasetSpec spec;
  spec.dir = cfg.data.dir;
  spec.format = cfg.data.format;
  spec.files = cfg.data.files;
  spec.samples = cfg.data.samples;
  spec.sample_bytes = cfg.data.sample_bytes;
  spec.spread = cfg.data.spread;
  spec.seed = cfg.seed;
  return spec;
}

std::string with_unit(uint64_t bytes) {
  const char* units[] = {"bytes", "kB", "MB", "GB", "TB", "PB", "EB"};
  double value = double(bytes);
  size_t unit = 0;
  while (value >= 1000 && unit + 1 < std::size(units)) {
    value /= 1000;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
  return text;
}

// "" when data.dir's filesystem has room for the dataset, else why not. The folder may not exist
// yet: its nearest existing parent is asked. Shards that a --force rewrite truncates count as room.
std::string space_problem(const DatasetSpec& spec) {
  std::error_code ec;
  fs::path existing = fs::absolute(spec.dir, ec);
  while (!fs::exists(existing, ec) && existing.has_relative_path())
    existing = existing.parent_path();
  struct statvfs fs_stats {};
  if (::statvfs(existing.c_str(), &fs_stats) != 0) return "";  // cannot tell: writing will
  const uint64_t available = uint64_t(fs_stats.f_bavail) * uint64_t(fs_stats.f_frsize);
  uint64_t replaced = 0;
  for (int f = 0; f < spec.files; ++f)
    for (const std::string& name : {shard_name(spec, f), shard_index_name(f)}) {
      const fs::path path = fs::path(spec.dir) / name;
      if (!fs::is_regular_file(path, ec)) continue;
      const uintmax_t size = fs::file_size(path, ec);
      if (!ec) replaced += size;
    }
  const uint64_t needed = dataset_bytes_on_storage(spec);
  if (needed <= available + replaced) return "";
  return "data.dir '" + spec.dir + "': the dataset needs about " + std::to_string(needed) +
         " bytes (" + with_unit(needed) + ": data.samples=" + std::to_string(spec.samples) +
         " of data.sample_bytes=" + std::to_string(spec.sample_bytes) +
         ", with their indexes), but " + existing.string() + " has " + std::to_string(available) +
         " bytes (" + with_unit(available) + ") free" +
         (replaced > 0 ? ", plus " + std::to_string(replaced) + " in the shards it would replace"
                       : std::string()) +
         "; nothing was written";
}

// Rank 0 decides: nothing to do (returns true), a clear error, or (re)write after removing the
// index, so a half-rewritten dataset never counts. Nothing is written before the free space is
// known to suffice.
bool already_prepared(const TrainConfig& cfg, const DatasetSpec& spec, const World& world) {
  std::string problem;
  int already = 0;
  if (world.rank == 0) {
    std::error_code ec;
    if (fs::exists(spec.dir + "/index.json", ec)) {
      try {
        const std::string difference = index_difference(read_index(spec.dir), spec);
        if (difference.empty())
          already = 1;
        else if (!cfg.data.force)
          problem = "data.dir '" + spec.dir + "' holds a dataset prepared with other parameters (" +
                    difference + "); pass --force to replace it";
      } catch (const UsageError& e) {
        if (!cfg.data.force) problem = std::string(e.what()) + "; pass --force to replace it";
      }
    }
    if (problem.empty() && !already) problem = space_problem(spec);
    if (problem.empty() && !already) {
      fs::create_directories(spec.dir, ec);
      fs::remove(spec.dir + "/index.json", ec);
      if (!fs::is_directory(spec.dir))
        problem = "data.dir '" + spec.dir + "': cannot create the folder";
    }
  }
  agree_or_throw<UsageError>(world, problem);
  mpiCheck(MPI_Bcast(&already, 1, MPI_INT, 0, world.comm));
  return already != 0;
}

// Each rank writes the shards f = rank, rank + size, ...; returns every shard's bytes.
std::vector<uint64_t> write_shards(const DatasetSpec& spec, const World& world) {
  std::vector<uint64_t> bytes(size_t(spec.files), 0);
  std::string failure;
  try {
    for (int f = world.rank; f < spec.files; f += world.size)
      bytes[size_t(f)] = write_shard(spec, f);
  } catch (const RuntimeError& e) {
    failure = "prepare-data on host " + world.host + ": " + e.what();
  }
  agree_or_throw<EnvironmentError>(world, failure);
  mpiCheck(
      MPI_Allreduce(MPI_IN_PLACE, bytes.data(), spec.files, MPI_UINT64_T, MPI_SUM, world.comm));
  return bytes;
}

// The index is written last: the dataset counts from this rename on.
void commit_index(const DatasetSpec& spec, const std::vector<uint64_t>& bytes, double seconds,
                  const World& world) {
  const std::string text = index_json(spec, bytes).dump(2) + "\n";
  const std::string path = spec.dir + "/index.json";
  try {
    write_file_atomically(path, text);
  } catch (const RuntimeError& e) {
    throw RuntimeError(std::string("prepare-data: cannot write the index: ") + e.what());
  }
  uint64_t total = 0;
  for (uint64_t b : bytes) total += b;
  std::printf(
      "prepare-data: %lld samples in %d %s shards, %.3f GB, written by %d ranks in "
      "%.2f s (%.2f GB/s); index %s\n",
      static_cast<long long>(spec.samples), spec.files, spec.format.c_str(), double(total) / 1e9,
      world.size, seconds, double(total) / 1e9 / seconds, path.c_str());
}

int prepare_on_world(const TrainConfig& cfg, const World& world) {
  const DatasetSpec spec = spec_from(cfg);
  if (already_prepared(cfg, spec, world)) {
    if (world.rank == 0)
      std::printf(
          "prepare-data: %s already holds this dataset (%lld samples, %d %s shards); "
          "nothing to do\n",
          spec.dir.c_str(), static_cast<long long>(spec.samples), spec.files, spec.format.c_str());
    return kExitPass;
  }
  const auto start = std::chrono::steady_clock::now();
  const std::vector<uint64_t> bytes = write_shards(spec, world);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Rank 0 alone writes the index; a failure there is its own, so it aborts the job.
  if (world.rank == 0) commit_index(spec, bytes, seconds, world);
  return kExitPass;
}

}  // namespace

int run_prepare_data(const Invocation& inv) {
  const TrainConfig cfg = train_config_from(inv.options);
  if (cfg.data.dir.empty()) throw UsageError("prepare-data needs data.dir");
  MpiCommand command;
  command.name = "prepare-data";
  command.log_level = inv.options["log.level"].as<std::string>();
  set_test_linger(command, inv.options);
  return run_mpi_command(command, [&](World& world) { return prepare_on_world(cfg, world); });
}

}  // namespace tp
