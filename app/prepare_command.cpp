#include "app/prepare_command.h"

#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

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

int prepare_on_world(const TrainConfig& cfg, World& world) {
  const DatasetSpec spec = spec_from(cfg);
  // Rank 0 decides: nothing to do, a clear error, or (re)write.
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
    if (problem.empty() && !already) {
      fs::create_directories(spec.dir, ec);
      fs::remove(spec.dir + "/index.json", ec);  // the dataset does not count until rewritten
      if (!fs::is_directory(spec.dir))
        problem = "data.dir '" + spec.dir + "': cannot create the folder";
    }
  }
  if (const std::string first = first_problem(world, problem); !first.empty())
    throw UsageError(first);
  mpiCheck(MPI_Bcast(&already, 1, MPI_INT, 0, world.comm));
  if (already) {
    if (world.rank == 0)
      std::printf(
          "prepare-data: %s already holds this dataset (%lld samples, %d %s shards); "
          "nothing to do\n",
          spec.dir.c_str(), static_cast<long long>(spec.samples), spec.files, spec.format.c_str());
    return kExitPass;
  }

  const auto start = std::chrono::steady_clock::now();
  std::vector<uint64_t> bytes(size_t(spec.files), 0);
  std::string failure;
  try {
    for (int f = world.rank; f < spec.files; f += world.size)
      bytes[size_t(f)] = write_shard(spec, f);
  } catch (const RuntimeError& e) {
    failure = "on host " + world.host + ": " + e.what();
  }
  if (const std::string first = first_problem(world, failure); !first.empty())
    throw EnvironmentError("prepare-data: " + first);
  mpiCheck(
      MPI_Allreduce(MPI_IN_PLACE, bytes.data(), spec.files, MPI_UINT64_T, MPI_SUM, world.comm));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (world.rank == 0) {
    const std::string text = index_json(spec, bytes).dump(2) + "\n";
    const std::string path = spec.dir + "/index.json";
    try {
      write_file_atomically(path, text);
    } catch (const RuntimeError& e) {
      throw EnvironmentError(std::string("prepare-data: cannot write the index: ") + e.what());
    }
    uint64_t total = 0;
    for (uint64_t b : bytes) total += b;
    std::printf(
        "prepare-data: %lld samples in %d %s shards, %.3f GB, written by %d ranks in "
        "%.2f s (%.2f GB/s); index %s\n",
        static_cast<long long>(spec.samples), spec.files, spec.format.c_str(), double(total) / 1e9,
        world.size, seconds, double(total) / 1e9 / seconds, path.c_str());
  }
  return kExitPass;
}

}  // namespace

int run_prepare_data(const Invocation& inv) {
  const TrainConfig cfg = train_config_from(inv.options);
  if (cfg.data.dir.empty()) throw UsageError("prepare-data needs data.dir");
  if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) {
    std::fprintf(stderr, "trainproof: MPI_Init failed on host %s\n", host_name().c_str());
    return kExitRuntime;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int code = kExitRuntime;
  World world = make_world("");
  try {
    code = prepare_on_world(cfg, world);
  } catch (const UsageError& e) {
    if (world.rank == 0) std::fprintf(stderr, "trainproof: error: %s\n", e.what());
    code = kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trainproof: error on rank %d (%s): %s\n", world.rank, world.host.c_str(),
                 e.what());
    MPI_Abort(MPI_COMM_WORLD, kExitRuntime);
  }
  free_world(world);
  MPI_Finalize();
  return code;
}

}  // namespace tp
