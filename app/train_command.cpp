#include "app/train_command.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "app/build_info.h"
#include "app/context.h"
#include "app/report.h"
#include "app/summary.h"
#include "checkpoint/async_writer.h"
#include "checkpoint/store.h"
#include "common/clock.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/hdf5_info.h"
#include "common/log.h"
#include "common/sysinfo.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "gpu/gpu_loader.h"
#include "kernels/cpu_backend.h"
#include "mpi/check.h"
#include "mpi/clock_sync.h"
#include "mpi/collective_check.h"
#include "mpi/world.h"
#include "train/preemption.h"
#include "train/step_loop.h"
#include "train/watchdog.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The report's data section from every rank's loader figures (5 per rank, rank-major) and its
// share of its host's CPUs (cpu_shares).
json data_json(const TrainConfig& cfg, const DatasetSpec& spec, const std::vector<double>& per_rank,
               const std::vector<double>& cpu_share, int ranks) {
  const uint64_t total_bytes = dataset_bytes(spec);
  double bytes = 0, samples = 0, busy = 0, window = 0, ram = 0;
  double rank_min = 0, rank_max = 0;
  // A rank with fewer CPUs of its own than its reader threads plus the step thread makes them
  // take turns: its read figures and its stall then measure CPU, not storage.
  const int threads_per_rank = cfg.data.readers + 1;
  double cpus_min = 0;
  int starved_rank = -1;
  for (int r = 0; r < ranks; ++r) {
    const double* f = &per_rank[size_t(r) * 5];
    const double cpus = cpu_share.at(size_t(r));
    if (r == 0 || cpus < cpus_min) cpus_min = cpus;
    if (cpus < threads_per_rank && starved_rank < 0) starved_rank = r;
    bytes += f[0];
    samples += f[1];
    busy += f[2];
    window = std::max(window, f[3]);
    ram += f[4];
    const double gbps = f[3] > 0 ? f[0] / f[3] / 1e9 : 0.0;
    rank_min = r == 0 ? gbps : std::min(rank_min, gbps);
    rank_max = std::max(rank_max, gbps);
  }
  json data{{"dir", cfg.data.dir},
            {"format", spec.format},
            {"files", spec.files},
            {"samples", spec.samples},
            {"dataset_bytes", total_bytes},
            {"readers", cfg.data.readers},
            {"prefetch", cfg.data.prefetch},
            {"verify", cfg.data.verify},
            {"cache", cfg.data.cache},
            {"direct", cfg.data.direct},
            {"epochs", double(cfg.steps) * double(cfg.model.global_batch) / double(spec.samples)},
            {"bytes_read", uint64_t(bytes)},
            {"samples_read", uint64_t(samples)},
            {"reader_busy_s", busy},
            {"read_gbps", window > 0 ? bytes / window / 1e9 : 0.0},
            {"rank_read_gbps", {{"min", rank_min}, {"max", rank_max}}},
            {"samples_per_s", window > 0 ? samples / window : 0.0},
            {"ram_of_reading_nodes", uint64_t(ram)},
            {"cpus_per_rank_min", cpus_min},
            {"page_cache_warning", ""},
            {"cpu_warning", ""}};
  if (double(total_bytes) < 5.0 * ram)
    data["page_cache_warning"] =
        "the dataset (" + std::to_string(total_bytes / 1000000) +
        " MB) is smaller than 5x the RAM "
        "of the nodes reading it (" +
        std::to_string(uint64_t(ram) / 1000000) +
        " MB): the page cache can hold it, so read figures may measure memory, not storage "
        "(MLPerf Storage requires 5x; or use data.cache=drop)";
  if (starved_rank >= 0) {
    char text[512];
    std::snprintf(text, sizeof text,
                  "rank %d has %.3g CPU(s) of its own (its affinity, shared with the ranks of its "
                  "host that may run there) for %d reader thread(s) and the step: they take "
                  "turns, so read "
                  "figures and the data stall measure CPU, not storage (give each rank %d cores: "
                  "srun --cpus-per-task=%d, or mpirun --map-by slot:PE=%d or --bind-to none)",
                  starved_rank, cpu_share.at(size_t(starved_rank)), cfg.data.readers,
                  threads_per_rank, threads_per_rank, threads_per_rank);
    data["cpu_warning"] = text;
  }
  return data;
}

CheckpointOptions checkpoint_options(const TrainConfig& cfg) {
  CheckpointOptions o;
  o.dir = cfg.checkpoint_dir;
  o.keep = cfg.checkpoint_keep;
  o.cold_read = cfg.checkpoint_cold_read;
  o.layout = parse_layout(cfg.checkpoint_layout);
  o.shard_optimizer = cfg.checkpoint_shard_optimizer;
  o.test_unshared_rank = cfg.test.unshared_checkpoint_rank;
  return o;
}

struct Backends {
  std::unique_ptr<ComputeBackend> compute;
  std::unique_ptr<Collective> comm;
  std::vector<std::string> notes;
  const GpuApi* gpu = nullptr;  // set when the GPU library is loaded and a device is usable
  int device_count = 0;
  int gpu_sharers = 1;  // ranks of this host computing on this rank's GPU
};

// Every rank takes the same decision: a choice that holds on one host but not another (GPUs
// present, enough of them for NCCL) is agreed over all ranks before anything is created.
Backends select_backends(const TrainConfig& cfg, const World& world, const Heartbeat& heartbeat) {
  Backends b;
  if (cfg.comm_backend == "nccl" && cfg.compute_backend == "cpu")
    throw UsageError("comm.backend=nccl needs compute.backend=cuda (NCCL reduces device memory)");
  const bool gpu_wanted = cfg.compute_backend != "cpu";

  std::string gpu_problem;
  if (gpu_wanted) {
    const GpuLibrary& lib = load_gpu_library();
    if (!lib.api) {
      gpu_problem = "GPU backend library not loaded (" + lib.error +
                    "; set TRAINPROOF_GPU_LIB or build with CUDA and NCCL)";
    } else {
      try {
        b.device_count = lib.api->device_count();
        b.gpu = lib.api;
      } catch (const RuntimeError& e) {
        gpu_problem = e.what();
      }
    }
  }
  const std::string where = " on host " + world.host + ": ";
  const std::string first_gpu_problem =
      gpu_wanted
          ? first_problem(world, gpu_problem.empty() ? "" : "no usable GPU" + where + gpu_problem)
          : "";
  const bool explicit_gpu = cfg.compute_backend == "cuda" || cfg.comm_backend == "nccl";
  if (!first_gpu_problem.empty() && explicit_gpu)
    throw EnvironmentError(
        (cfg.comm_backend == "nccl" ? "comm.backend=nccl: " : "compute.backend=cuda: ") +
        first_gpu_problem);
  const bool use_cuda = gpu_wanted && first_gpu_problem.empty();
  if (cfg.compute_backend == "auto")
    b.notes.push_back(use_cuda ? "compute.backend=auto chose cuda"
                               : "compute.backend=auto chose cpu: " +
                                     (first_gpu_problem.empty() ? std::string("no GPU wanted")
                                                                : first_gpu_problem));

  // Which ranks share a GPU is learned from the devices' UUIDs, not guessed from counts: under
  // Slurm's per-task GPU binding every rank sees one device, and all of them are different.
  int device = -1;
  if (use_cuda) {
    device = device_for_local_rank(world.local_rank, b.device_count);
    const GpuDevice mine = b.gpu->inventory().at(size_t(device));
    const std::string key = world.host + "|" + mine.uuid;
    const auto all = all_gather_strings(world, key);
    b.gpu_sharers = int(std::count(all.begin(), all.end(), key));
    // Exclusive or prohibited compute mode lets one process at most use the GPU.
    std::string sharing_problem;
    if (b.gpu_sharers > 1 && mine.compute_mode != 0)
      sharing_problem = "GPU " + std::to_string(device) + " (" + mine.uuid + ") on host " +
                        world.host + " is in an exclusive compute mode, but " +
                        std::to_string(b.gpu_sharers) + " ranks would share it";
    if (const auto first = first_problem(world, sharing_problem); !first.empty())
      throw EnvironmentError(first + " (run one rank per GPU)");
  }

  // NCCL refuses two ranks on one GPU.
  std::string nccl_problem;
  if (use_cuda && b.gpu_sharers > 1)
    nccl_problem = "GPU " + std::to_string(device) + " on host " + world.host + " is shared by " +
                   std::to_string(b.gpu_sharers) + " local ranks";
  const std::string first_nccl_problem =
      cfg.comm_backend == "mpi" || !use_cuda ? "" : first_problem(world, nccl_problem);
  if (cfg.comm_backend == "nccl" && !first_nccl_problem.empty())
    throw UsageError("comm.backend=nccl: " + first_nccl_problem +
                     " (NCCL needs one GPU per rank; use comm.backend=mpi to share GPUs)");
  const bool use_nccl = cfg.comm_backend == "nccl" ||
                        (cfg.comm_backend == "auto" && use_cuda && first_nccl_problem.empty());
  if (cfg.comm_backend == "auto")
    b.notes.push_back(use_nccl ? "comm.backend=auto chose nccl"
                               : "comm.backend=auto chose mpi" +
                                     (use_cuda ? ": " + first_nccl_problem
                                               : std::string(": compute is on the cpu")));

  if (!use_cuda && cfg.dtype != "fp32")
    throw UsageError("model.dtype=" + cfg.dtype +
                     " needs compute.backend=cuda; the cpu backend computes fp32");
  if (use_cuda) {
    b.compute = b.gpu->make_compute(device, cfg.dtype);
  } else {
    b.compute = make_cpu_backend();
    b.gpu = nullptr;
  }
  const bool oversubscribed = world.local_size > int(online_cpus());
  // The watchdog's evidence: heartbeats of the ranks that are behind this one.
  auto name_missing = [dir = heartbeat.dir(), rank = world.rank,
                       size = world.size](const std::string& what) {
    const auto all = Heartbeat::read_all(dir, size);
    return write_abort_record(dir, what, all[rank], Heartbeat::behind(all, all[rank]));
  };
  if (use_nccl)
    b.comm = b.gpu->make_nccl(
        world, *b.compute,
        cfg.watchdog_timeout_s > 0 ? cfg.watchdog_timeout_s : kWatchdogUntilWarmedUpS,
        name_missing);
  else if (use_cuda)
    b.comm = b.gpu->stage_through_host(make_mpi_collective(world, oversubscribed), *b.compute);
  else
    b.comm = make_mpi_collective(world, oversubscribed);
  return b;
}

std::string gib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", double(bytes) / double(1ull << 30));
  return text;
}

// Refuses, on every rank alike, a model that would not fit in the memory its ranks share: the
// host's RAM for the CPU backend, a device's free memory for the CUDA backend.
void check_memory(const World& world, const Backends& backends, const BackendConfig& bc,
                  const TrainConfig& cfg) {
  const ComputeBackend& backend = *backends.compute;
  // Host-side batch staging (inputs and targets) lives outside the backend.
  const uint64_t staging = 2 * sizeof(float) * uint64_t(bc.local_samples) * bc.seq * bc.hidden;
  const bool on_gpu = backends.gpu != nullptr;
  const uint64_t per_rank = backend.bytes_needed(bc) + (on_gpu ? 0 : staging);
  const int sharers = on_gpu ? backends.gpu_sharers : world.local_size;
  const uint64_t needed = per_rank * uint64_t(sharers);
  const auto available = backend.memory_available();
  std::string problem;
  if (available && double(needed) > 0.9 * double(*available))
    problem = "model too large for " + std::string(on_gpu ? "GPU memory" : "memory") + " on host " +
              world.host + ": " + std::to_string(sharers) + " ranks x " + gib(per_rank) + " = " +
              gib(needed) + " needed, " + gib(*available) +
              " available (model.layers=" + std::to_string(cfg.model.layers) +
              ", model.hidden=" + std::to_string(cfg.model.hidden) +
              ", model.seq=" + std::to_string(cfg.model.seq) +
              ", model.batch=" + std::to_string(cfg.model.global_batch) + ")";
  const std::string first = first_problem(world, problem);
  if (!first.empty()) throw UsageError(first);
}

void check_report_path(const std::string& path) {
  const fs::path parent = fs::absolute(path).parent_path();
  if (!fs::is_directory(parent))
    throw UsageError("--report " + path + ": directory '" + parent.string() + "' does not exist");
  if (access(parent.c_str(), W_OK) != 0)
    throw UsageError("--report " + path + ": directory '" + parent.string() + "' is not writable");
}

void write_report(const std::string& path, const json& report) {
  try {
    write_file_atomically(path, report.dump(2) + "\n");
  } catch (const RuntimeError& e) {
    throw RuntimeError(std::string("cannot write the report on ") + identity() + ": " + e.what());
  }
}

std::string pretend_host(const World& probe, int split_hosts, int size, int rank) {
  if (split_hosts <= 0) return "";
  const int group = int(int64_t(rank) * std::min(split_hosts, size) / size);
  return probe.host + "-vnode" + std::to_string(group);
}

// Per-host GPU facts, gathered from each host's first local rank: its inventory and the clock
// and persistence warnings its nvidia-smi gives.
struct HostGpuFacts {
  json gpus = json::array();
  std::vector<std::string> warnings;
};

HostGpuFacts gather_gpu_facts(const World& world, const Backends& backends) {
  std::string mine;
  if (world.local_rank == 0 && backends.gpu)
    mine = json{{"gpus", gpu_inventory(backends.gpu->inventory(), world.host)},
                {"warnings", gpu_clock_warnings(gpu_clock_query_output(), world.host)}}
               .dump();
  HostGpuFacts facts;
  for (const std::string& host : gather_strings_at_root(world, mine)) {
    if (host.empty()) continue;
    const json parsed = json::parse(host);
    for (const auto& g : parsed["gpus"]) facts.gpus.push_back(g);
    for (const auto& w : parsed["warnings"]) facts.warnings.push_back(w);
  }
  return facts;
}

json build_context(const Invocation& inv, const TrainConfig& cfg, const World& world,
                   const std::string& start_time, const Backends& backends,
                   const HostGpuFacts& gpu_facts, int64_t measured_steps,
                   const std::optional<CheckpointFolderFacts>& folder) {
  json ctx;
  ctx["tool"] = {
      {"name", "trainproof"}, {"version", build::kVersion}, {"git_revision", build::kGitRevision}};
  ctx["build"] = {{"type", build::kBuildType},
                  {"sanitizers", build::kSanitizers},
                  {"gpu_toolchain_found", build::kGpuToolchainFound},
                  {"gpu_backend_built", build::kGpuBackendBuilt},
                  {"gpu_backend_loaded", backends.gpu != nullptr}};
  ctx["start_time"] = start_time;
  ctx["end_time"] = utc_timestamp();
  ctx["command_line"] = inv.argv;
  ctx["scenario_file"] = inv.scenario_path.empty() ? json(nullptr) : json(inv.scenario_path);
  ctx["scenario_text"] = inv.scenario_text.empty() ? json(nullptr) : json(inv.scenario_text);
  ctx["scenario_hash"] = scenario_hash(cfg);
  ctx["options"] = effective_options(inv.options);
  ctx["world_size"] = world.size;
  ctx["hosts"] = world.hosts;
  json per_host = json::object();
  int busiest = 0;
  for (const auto& h : world.hosts) {
    per_host[h] = world.ranks_on(h);
    busiest = std::max(busiest, world.ranks_on(h));
  }
  ctx["ranks_per_host"] = per_host;
  ctx["versions"] = {{"mpi", mpi_library_version()},  {"nccl", nullptr},   {"cuda", nullptr},
                     {"cuda_driver_api", nullptr},    {"driver", nullptr}, {"hdf5", hdf5_version()},
                     {"openblas", openblas_version()}};
  if (backends.gpu) {
    const GpuVersions v = backends.gpu->versions();
    ctx["versions"]["nccl"] = nccl_version_string(v.nccl);
    ctx["versions"]["cuda"] = cuda_version_string(v.cuda_runtime);
    ctx["versions"]["cuda_driver_api"] = cuda_version_string(v.cuda_driver);
    const std::string driver = nvidia_smi_query("driver_version");
    if (!driver.empty()) ctx["versions"]["driver"] = driver;
  }
  ctx["gpus"] = gpu_facts.gpus;
  auto env_or = [](const char* name, const char* otherwise) {
    const char* value = std::getenv(name);
    return std::string(value ? value : otherwise);
  };
  const char* kNcclChooses =
      "chosen per call by NCCL's tuner (not exposed by its API; "
      "NCCL_DEBUG=INFO logs it)";
  ctx["nccl"] = backends.comm->name() == "nccl"
                    ? json{{"algorithm", env_or("NCCL_ALGO", kNcclChooses)},
                           {"protocol", env_or("NCCL_PROTO", kNcclChooses)}}
                    : json(nullptr);
  ctx["nvidia_smi_topo"] = nvidia_smi_topology();
  ctx["environment"] = launcher_environment(process_environment());
  ctx["checkpoint_filesystem"] =
      folder ? json{{"path", fs::absolute(folder->path).string()},
                    {"type", folder->filesystem},
                    {"node_local", node_local_filesystem(folder->filesystem)}}
             : json(nullptr);
  ctx["backends"] = {{"compute", backends.compute->name()},
                     {"comm", backends.comm->name()},
                     {"compute_requested", cfg.compute_backend},
                     {"comm_requested", cfg.comm_backend},
                     {"notes", backends.notes}};
  // CPU oversubscription matters only where the CPU computes.
  const int cpu_busiest = backends.gpu ? 1 : busiest;
  std::vector<std::string> warnings =
      timing_warnings({cpu_busiest, online_cpus(), cpu_governor(), build::kBuildType,
                       build::kSanitizers, measured_steps});
  warnings.insert(warnings.end(), gpu_facts.warnings.begin(), gpu_facts.warnings.end());
  if (folder) {
    const auto folder_warnings = checkpoint_folder_warnings(*folder, int(world.hosts.size()));
    warnings.insert(warnings.end(), folder_warnings.begin(), folder_warnings.end());
  }
  if (backends.gpu && backends.gpu_sharers > 1)
    warnings.push_back(std::to_string(backends.gpu_sharers) +
                       " ranks share one GPU: they time-slice it, so compute figures are not a "
                       "single rank's");
  ctx["warnings"] = warnings;
  return ctx;
}

int train_on_world(const Invocation& inv, const TrainConfig& cfg_in, World& world) {
  TrainConfig cfg = cfg_in;
  const std::string start_time = utc_timestamp();
  const std::string report_path = inv.options["report"].as<std::string>();
  std::unique_ptr<Heartbeat> heartbeat;
  // Checks that can fail on some ranks only are agreed, so every rank stops alike.
  std::string problem;
  try {
    if (world.rank == 0) check_report_path(report_path);
    heartbeat = std::make_unique<Heartbeat>(
        cfg.watchdog_dir.empty()
            ? (fs::absolute(report_path).parent_path() / "trainproof-heartbeats").string()
            : cfg.watchdog_dir,
        world.rank, world.host);
  } catch (const UsageError& e) {
    problem = e.what();
  }
  if (const std::string first = first_problem(world, problem); !first.empty())
    throw UsageError(first);
  // A dataset on storage: its index is authoritative; options given explicitly must agree.
  std::optional<DatasetSpec> dataset;
  if (!cfg.data.dir.empty()) {
    std::string data_problem;
    try {
      dataset = read_index(cfg.data.dir);
      DatasetSpec wanted = *dataset;
      for (const std::string& name : cfg.data.given) {
        if (name == "data.format") wanted.format = cfg.data.format;
        if (name == "data.files") wanted.files = cfg.data.files;
        if (name == "data.samples") wanted.samples = cfg.data.samples;
        if (name == "data.sample_bytes") wanted.sample_bytes = cfg.data.sample_bytes;
        if (name == "data.spread") wanted.spread = cfg.data.spread;
      }
      wanted.seed = cfg.seed;
      if (const std::string d = index_difference(*dataset, wanted); !d.empty())
        data_problem = "data.dir '" + cfg.data.dir + "' holds a different dataset (" + d +
                       "; dataset vs this run); rerun prepare-data";
    } catch (const UsageError& e) {
      data_problem = e.what();
    }
    if (const std::string first = first_problem(world, data_problem); !first.empty())
      throw UsageError(first);
    cfg.data.format = dataset->format;
    cfg.data.files = dataset->files;
    cfg.data.samples = dataset->samples;
    cfg.data.sample_bytes = dataset->sample_bytes;
    cfg.data.spread = dataset->spread;
    if (cfg.epochs > 0)
      cfg.steps = int64_t(
          std::ceil(cfg.epochs * double(dataset->samples) / double(cfg.model.global_batch)));
  }
  for (FaultSpec& f : cfg.faults) {
    if (f.kind == FaultSpec::Kind::corrupt)
      throw UsageError("--fault '" + f.text +
                       "': corrupt damages a checkpoint between runs, so only trainproof drill "
                       "applies it");
    if (f.kind == FaultSpec::Kind::random) {
      const std::string seed = f.text;
      f = resolve_random(f, world.size, cfg.steps, cfg.checkpoint_every);
      if (world.rank == 0) spdlog::warn("fault {} drew {}", seed, f.text);
    }
  }
  // checkpoint.every is 0 without checkpoint.dir (the command line refuses anything else).
  validate_faults(cfg.faults, world.size, cfg.steps, cfg.checkpoint_every);
  // Every backend is watched: a rank that stops moving is named from the heartbeats.
  const Watchdog watchdog(*heartbeat, world.size, cfg.watchdog_timeout_s, cfg.warmup_steps);
  if (cfg.model.global_batch < world.size)
    throw UsageError("model.batch=" + std::to_string(cfg.model.global_batch) +
                     " is smaller than the world size " + std::to_string(world.size) +
                     ": every rank needs at least one sample");
  Backends backends = select_backends(cfg, world, *heartbeat);

  const BatchShare share = batch_share(cfg.model.global_batch, world.size, world.rank);
  BackendConfig bc{cfg.model.layers, cfg.model.hidden, cfg.model.seq, cfg.model.global_batch,
                   share.samples,    cfg.seed,         cfg.optimizer};
  check_memory(world, backends, bc, cfg);
  backends.compute->initialize(bc);

  AlignedClock clock(cfg.test.clock_offset_rank == world.rank ? cfg.test.clock_offset_s : 0.0);
  if (!cfg.test.skip_clock_alignment) clock.align(world.comm);

  // Checkpoints: the folder is proven writable before step 1, and a resume restores the newest
  // checkpoint that verifies.
  std::unique_ptr<CheckpointStore> store;
  std::optional<CheckpointRestore> restored;
  std::optional<CheckpointFolderFacts> folder_facts;
  int64_t first_step = 1;
  if (!cfg.checkpoint_dir.empty()) {
    store = std::make_unique<CheckpointStore>(checkpoint_options(cfg), world, scenario_hash(cfg),
                                              clock);
    folder_facts = store->preflight();
    if (cfg.resume == "none" && world.rank == 0 && store->newest_committed() > 0)
      spdlog::warn(
          "checkpoint.dir '{}' already holds checkpoints up to step {}; --resume none "
          "starts fresh and replaces those it reaches",
          cfg.checkpoint_dir, store->newest_committed());
    if (cfg.resume != "none") {
      // The restore decodes into buffers the model already has, as a framework loads a state
      // into allocated parameters: allocating (and faulting in) the memory is set-up, not restore.
      TrainingState state;
      backends.compute->export_state(state);
      restored = store->restore(state);
      if (restored) {
        if (cfg.test.skip_restore == "moment1")
          std::fill(state.moment1.begin(), state.moment1.end(), 0.0f);
        backends.compute->import_state(state);
        first_step = restored->step + 1;
        if (world.rank == 0)
          spdlog::info("restored {} (step {}, {:.3f} s)", restored->folder, restored->step,
                       restored->seconds);
      } else if (cfg.resume == "require") {
        throw UsageError("--resume require: no valid checkpoint in checkpoint.dir '" +
                         cfg.checkpoint_dir + "'");
      } else if (world.rank == 0) {
        spdlog::warn("--resume auto: no valid checkpoint in '{}'; STARTING FRESH from step 1",
                     cfg.checkpoint_dir);
      }
    }
  }

  // The self-check reduces through the step's own collective, in the gradient buffer (the memory
  // the step reduces), before step 1 overwrites it.
  ComputeBackend& compute = *backends.compute;
  const size_t check_floats =
      std::min({size_t(cfg.bucket_mb * 262144.0) + 1024, size_t(1) << 20,
                size_t(cfg.model.layers) * cfg.model.hidden * cfg.model.hidden});
  const ReductionBuffer check_buffer{
      compute.gradients(), check_floats,
      [&](const std::vector<float>& v) { compute.write_gradients(v.data(), v.size()); },
      [&](std::vector<float>& v) { compute.read_gradients(v.data(), v.size()); }};
  const CollectiveCheck collective =
      check_allreduce(*backends.comm, world, check_buffer, cfg.test.corrupt_collective_rank);
  if (collective.wrong_elements > 0)
    spdlog::error("collective self-check: {} wrong elements, first on rank {}",
                  collective.wrong_elements, collective.first_wrong_rank);
  if (cfg.test.mpi_error_rank == world.rank)
    mpiCheck(MPI_Bcast(nullptr, -1, MPI_INT, 0, world.comm));  // count -1: MPI_ERR_COUNT
  const double gemm_rate = backends.compute->measure_gemm_rate(0.2);
  if (world.rank == 0)
    spdlog::info(
        "{} ranks on {} hosts; model {} layers x {} hidden, seq {}, global batch {}; "
        "compute {}, comm {} ({})",
        world.size, world.hosts.size(), cfg.model.layers, cfg.model.hidden, cfg.model.seq,
        cfg.model.global_batch, backends.compute->name(), backends.comm->name(),
        cfg.overlap ? "overlapped" : "blocking");
  mpiCheck(MPI_Barrier(world.comm));

  std::unique_ptr<BatchSource> source;
  DatasetBatchSource* loader = nullptr;
  if (dataset) {
    LoaderOptions lo;
    lo.readers = cfg.data.readers;
    lo.prefetch = cfg.data.prefetch;
    lo.verify = cfg.data.verify;
    lo.drop_cache = cfg.data.cache == "drop";
    lo.direct = cfg.data.direct;
    lo.test_read_delay_ms = cfg.test.read_delay_ms;
    lo.last_step = cfg.steps;
    if (cfg.data.rank_shift >= 0) {
      // Shard f was written by rank f mod N (prepare-data); read the shards of the rank K nodes
      // away, a node being the ranks that share this rank's host.
      const int per_node = world.ranks_on(world.host);
      const int source_rank =
          int((int64_t(world.rank) + int64_t(cfg.data.rank_shift) * per_node) % world.size);
      for (int f = source_rank; f < dataset->files; f += world.size) lo.shards.push_back(f);
      if (lo.shards.empty())
        throw UsageError("data.rank_shift needs data.files >= the world size (" +
                         std::to_string(dataset->files) + " files, " + std::to_string(world.size) +
                         " ranks)");
    }
    std::string open_problem;
    try {
      auto owned = std::make_unique<DatasetBatchSource>(*dataset, cfg.model, share, cfg.seed, lo);
      loader = owned.get();
      source = std::move(owned);
    } catch (const RuntimeError& e) {
      open_problem = "data.dir on host " + world.host + ": " + e.what();
    }
    if (const std::string first = first_problem(world, open_problem); !first.empty())
      throw UsageError(first);
  } else {
    source = std::make_unique<SyntheticBatchSource>(cfg.model, share, cfg.seed);
  }
  FaultInjector faults(cfg.faults, world.rank, world.host, heartbeat->dir());
  // The loader's position is a function of the step; the manifest records it for inspection.
  const auto loader_position = [&](int64_t step) {
    if (!dataset) return json::object();
    const int64_t consumed = step * cfg.model.global_batch;
    return json{
        {"data_loader",
         {{"epoch", consumed / dataset->samples}, {"cursor", consumed % dataset->samples}}}};
  };
  if (store)
    store->set_fault_hook(
        [&faults](int64_t step, const char* point) { faults.at_checkpoint(step, point); });
  if (store) store->set_manifest_extra(loader_position);
  StepLoop loop(cfg, world.rank, *backends.compute, *backends.comm, *source, faults, *heartbeat,
                clock);
  // Async checkpoints: the writer thread has its own communicator and store, so its collectives
  // never interleave with the step's.
  World writer_world = world;
  std::unique_ptr<CheckpointStore> writer_store;
  std::unique_ptr<AsyncCheckpointWriter> writer;
  if (store && cfg.checkpoint_async) {
    mpiCheck(MPI_Comm_dup(world.comm, &writer_world.comm));
    writer_store = std::make_unique<CheckpointStore>(checkpoint_options(cfg), writer_world,
                                                     scenario_hash(cfg), clock);
    writer_store->set_fault_hook(
        [&faults](int64_t step, const char* point) { faults.at_checkpoint(step, point); });
    writer_store->set_manifest_extra(loader_position);
    writer = std::make_unique<AsyncCheckpointWriter>(*writer_store);
  }
  std::vector<CheckpointSave> saves;
  std::vector<std::pair<int64_t, double>> stalls;  // step, seconds training waited
  int64_t last_checkpoint = 0;
  // The stall is what training waits: the whole save when synchronous; when async, the wait for
  // the previous checkpoint plus the snapshot into host memory.
  const auto take_checkpoint = [&](int64_t step) {
    const double begin = clock.local_now();
    TrainingState state;
    state.step = step;
    if (writer) {
      writer->wait();
      backends.compute->export_state(state);
      writer->submit(std::move(state));
    } else {
      backends.compute->export_state(state);
      saves.push_back(store->save(state));
    }
    stalls.emplace_back(step, clock.local_now() - begin);
    last_checkpoint = step;
  };
  const CheckpointHook checkpoint = [&](int64_t step) {
    if (!store || cfg.checkpoint_every == 0 || step % cfg.checkpoint_every != 0) return false;
    take_checkpoint(step);
    return true;
  };
  // With checkpoints on, a preemption signal stops every rank at the same step boundary with a
  // committed checkpoint of that step. The agreement costs one small allreduce per step.
  std::optional<std::pair<int, int64_t>> preempted;  // signal, step
  if (store) install_preemption_handlers();
  // Rank 0 leaves the run's progress beside the heartbeats, where a drill reads it even when the
  // run dies later: what it restored, and when its first step completed (the end of an RTO).
  const auto write_progress = [&](double first_step_end_unix) {
    if (world.rank != 0) return;
    const json progress{{"restored_step", restored ? json(restored->step) : json(nullptr)},
                        {"restore_seconds", restored ? json(restored->seconds) : json(nullptr)},
                        {"restore_gbps", restored ? json(restored->gbps()) : json(nullptr)},
                        {"first_step_end_unix",
                         first_step_end_unix > 0 ? json(first_step_end_unix) : json(nullptr)}};
    try {
      write_file_atomically(heartbeat->dir() + "/progress.json", progress.dump() + "\n");
    } catch (const std::exception&) {
      // Progress serves a drill; a run without a drill goes on without it.
    }
  };
  write_progress(0);
  double first_step_end_unix = 0;  // wall clock when this process completed its first step
  const StopHook stop = [&](int64_t step) {
    if (first_step_end_unix == 0) {
      first_step_end_unix = unix_seconds();
      write_progress(first_step_end_unix);
    }
    if (!store) return false;
    int signal = preemption_signal();
    mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &signal, 1, MPI_INT, MPI_MAX, world.comm));
    if (signal == 0) return false;
    if (last_checkpoint != step) take_checkpoint(step);
    if (writer) writer->wait();
    preempted = std::make_pair(signal, step);
    if (world.rank == 0)
      spdlog::warn(
          "{} received: stopped after step {} with its checkpoint committed; resume with "
          "--resume auto",
          signal_name(signal), step);
    return true;
  };
  const TrainResult result = loop.run(first_step, checkpoint, stop);
  double final_wait_s = 0;
  if (writer) {
    // The run is not over until its last checkpoint is committed.
    const double begin = clock.local_now();
    writer->wait();
    final_wait_s = clock.local_now() - begin;
    saves = writer->take_committed();
    writer.reset();
    writer_store.reset();
    mpiCheck(MPI_Comm_free(&writer_world.comm));
  }
  for (CheckpointSave& save : saves)
    for (const auto& [step, seconds] : stalls)
      if (save.step == step) save.stall_s = seconds;

  // Rank 0 gathers every rank's timings, digest and facts.
  const std::vector<double> all_timings = gather_at_root(world, flatten(result.measured));
  const std::vector<double> all_rates =
      gather_at_root(world, {gemm_rate, double(world.local_rank)});
  const auto digests = gather_strings_at_root(world, result.digest.hex());
  const auto affinities = gather_strings_at_root(world, cpu_affinity_list());
  const auto numa = gather_strings_at_root(world, numa_nodes_of(cpu_affinity()));
  const auto devices = gather_strings_at_root(world, backends.compute->device());
  // The loader's figures, per rank, and each host's RAM (from its first rank) for the 5x rule.
  const LoaderStats loaded = loader ? loader->stats() : LoaderStats{};
  std::string shards_read;
  for (int f : loaded.shards_read)
    shards_read += (shards_read.empty() ? "" : ",") + std::to_string(f);
  const auto all_shards_read = gather_strings_at_root(world, shards_read);
  const std::vector<double> all_loaded = gather_at_root(
      world, {double(loaded.bytes_read), double(loaded.samples_read), loaded.reader_busy_s,
              loaded.last_read_s - loaded.first_read_s,
              world.local_rank == 0 ? double(meminfo_bytes("MemTotal").value_or(0)) : 0.0});
  const HostGpuFacts gpu_facts = gather_gpu_facts(world, backends);

  int exit_code = kExitPass;
  if (world.rank == 0) {
    RunRecord run;
    run.config = cfg;
    run.steps_run = result.steps_run;
    run.first_step_end_unix = first_step_end_unix;
    run.restored = restored;
    if (preempted) run.preempted = {signal_name(preempted->first), preempted->second};
    run.saves = saves;
    run.checkpoint_final_wait_s = final_wait_s;
    run.collective = collective;
    run.comm_timing_method = backends.comm->timing_method(cfg.overlap);
    run.digests = digests;
    const size_t steps = result.measured.size();
    for (int r = 0; r < world.size; ++r) {
      run.ranks.push_back({r, world.host_of_rank[r], int(all_rates[2 * r + 1]), devices[r],
                           affinities[r], numa[r], all_rates[2 * r]});
      run.timings.push_back(unflatten(&all_timings[size_t(r) * steps * kStepTimingFields], steps));
    }
    run.context = build_context(inv, cfg, world, start_time, backends, gpu_facts, int64_t(steps),
                                folder_facts);
    if (dataset) {
      run.data = data_json(cfg, *dataset, all_loaded, cpu_shares(affinities, world.host_of_rank),
                           world.size);
      run.data["rank_shift"] = cfg.data.rank_shift;
      run.data["rank_shards_read"] = all_shards_read;
      for (const char* key : {"page_cache_warning", "cpu_warning"})
        if (const std::string w = run.data[key]; !w.empty()) run.context["warnings"].push_back(w);
    }
    const json report = build_report(run);
    const std::string path = inv.options["report"].as<std::string>();
    write_report(path, report);
    std::cout << '\n'
              << render_summary(report) << "report: " << fs::absolute(path).string() << '\n'
              << std::flush;
    exit_code = preempted ? kExitPreempted : exit_code_for(report["verdict"]);
  }
  mpiCheck(MPI_Bcast(&exit_code, 1, MPI_INT, 0, world.comm));
  heartbeat->finish();
  mpiCheck(MPI_Barrier(world.comm));
  if (world.rank == 0) heartbeat->remove_folder_if_empty();
  return exit_code;
}

}  // namespace

int run_train(const Invocation& inv) {
  const TrainConfig cfg = train_config_from(inv.options);  // usage errors before MPI starts
  int provided = 0;
  // The async checkpoint writer calls MPI from its own thread.
  const int required = cfg.checkpoint_async ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED;
  if (MPI_Init_thread(nullptr, nullptr, required, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "trainproof: MPI_Init_thread failed on host %s\n", host_name().c_str());
    return kExitRuntime;
  }
  if (provided < required) {
    std::fprintf(stderr,
                 "trainproof: error: checkpoint.async=true needs MPI_THREAD_MULTIPLE; the MPI "
                 "library on host %s provides level %d only (use checkpoint.async=false)\n",
                 host_name().c_str(), provided);
    MPI_Finalize();
    return kExitRuntime;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0;
  try {
    int size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    World probe;
    probe.host = host_name();
    World world = make_world(pretend_host(probe, cfg.test.split_hosts, size, rank));
    init_logging(world.rank, world.host, inv.options["log.level"].as<std::string>());
    set_identity(world.rank, world.host);
    int code = kExitRuntime;
    try {
      code = train_on_world(inv, cfg, world);
    } catch (const UsageError& e) {
      if (world.rank == 0) std::fprintf(stderr, "trainproof: error: %s\n", e.what());
      code = kExitUsage;
    } catch (const EnvironmentError& e) {
      if (world.rank == 0) std::fprintf(stderr, "trainproof: error: %s\n", e.what());
      code = kExitRuntime;
    }
    free_world(world);
    MPI_Finalize();
    return code;
  } catch (const std::exception& e) {
    // A runtime failure on one rank leaves the others blocked in a collective: abort them all.
    std::fprintf(stderr, "trainproof: runtime error on %s: %s\n", identity().c_str(), e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, kExitRuntime);
    return kExitRuntime;
  }
}

int run_report(const Invocation& inv) {
  if (inv.positional.size() != 1)
    throw UsageError("report needs exactly one FILE operand, got " +
                     std::to_string(inv.positional.size()));
  const std::string path = inv.positional.front();
  std::ifstream in(path);
  if (!in) throw UsageError("report: cannot open '" + path + "'");
  json report;
  try {
    report = json::parse(in);
    if (report.value("schema", "") != kReportSchema)
      throw UsageError("report '" + path + "': schema is not " + std::string(kReportSchema));
    std::cout << render_summary(report);
  } catch (const json::exception& e) {
    throw UsageError("report '" + path + "': " + e.what());
  }
  return exit_code_for(report["verdict"]);
}

}  // namespace tp
