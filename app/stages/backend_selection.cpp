#include "app/stages/backend_selection.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "checkpoint/memory_need.h"
#include "common/clock.h"
#include "common/errors.h"
#include "common/sysinfo.h"
#include "gpu/gpu_assignment.h"
#include "gpu/gpu_loader.h"
#include "kernels/cpu_backend.h"
#include "mpi/collective_ledger.h"
#include "mpi/comm_abort.h"
#include "train/watchdog.h"

namespace tp {
namespace {

// This rank's reason it cannot compute on a GPU, or "" (and `b` knows the library and devices).
std::string local_gpu_problem(Backends& b) {
  if (std::string missing = missing_gpu_driver(); !missing.empty()) return missing;
  const GpuLibrary& lib = load_gpu_library();
  if (!lib.api)
    return "GPU backend library not loaded (" + lib.error +
           "; set TRAINPROOF_GPU_LIB or build with CUDA and NCCL)";
  try {
    b.device_count = lib.api->device_count();
    b.gpu = lib.api;
  } catch (const RuntimeError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

std::string mixed_gpu_problem(const std::vector<std::string>& host_of_rank,
                              const std::vector<bool>& has_gpu) {
  const auto with = size_t(std::count(has_gpu.begin(), has_gpu.end(), true));
  if (with == 0 || with == has_gpu.size()) return "";
  std::vector<std::string> hosts;  // without a usable GPU, each once, in rank order
  for (size_t r = 0; r < has_gpu.size(); ++r)
    if (!has_gpu[r] && std::find(hosts.begin(), hosts.end(), host_of_rank[r]) == hosts.end())
      hosts.push_back(host_of_rank[r]);
  std::string named;
  for (size_t i = 0; i < std::min<size_t>(hosts.size(), 8); ++i)
    named += (i ? ", " : "") + hosts[i];
  if (hosts.size() > 8) named += " and " + std::to_string(hosts.size() - 8) + " more";
  return "compute.backend=auto: " + std::to_string(has_gpu.size() - with) + " of " +
         std::to_string(has_gpu.size()) + " ranks have no usable GPU (hosts " + named +
         "), the others do; fix those hosts, or ask for compute.backend=cpu";
}

namespace {

// Rank 0 learns which ranks have a GPU (O(n) there) and every rank the verdict.
std::string agree_on_mixed_gpus(const World& world, bool has_gpu) {
  const std::vector<std::string> all = gather_strings_at_root(world, has_gpu ? "1" : "0");
  std::string problem;
  if (world.rank == 0) {
    std::vector<bool> flags;
    for (const std::string& flag : all) flags.push_back(flag == "1");
    problem = mixed_gpu_problem(world.host_of_rank, flags);
  }
  return broadcast_from_root(world, problem);
}

// True when every rank can compute on a GPU and one is wanted. An explicit request for a GPU
// that some rank lacks is an error; "auto" falls back to the CPU and says why.
bool agree_on_cuda(const TrainConfig& cfg, const World& world, Backends& b) {
  if (cfg.comm_backend == "nccl" && cfg.compute_backend == "cpu")
    throw UsageError("comm.backend=nccl needs compute.backend=cuda (NCCL reduces device memory)");
  const bool wanted = cfg.compute_backend != "cpu";
  std::string mine, first;
  if (wanted) {
    mine = local_gpu_problem(b);
    first = first_problem(world,
                          mine.empty() ? "" : "no usable GPU on host " + world.host + ": " + mine);
  }
  const bool explicit_gpu = cfg.compute_backend == "cuda" || cfg.comm_backend == "nccl";
  // Some ranks without a GPU: under auto, the CPU for every rank only when no rank has one.
  if (wanted && !explicit_gpu && !first.empty())
    if (const std::string mixed = agree_on_mixed_gpus(world, mine.empty()); !mixed.empty())
      throw EnvironmentError(mixed);
  if (!first.empty() && explicit_gpu)
    throw EnvironmentError(
        (cfg.comm_backend == "nccl" ? "comm.backend=nccl: " : "compute.backend=cuda: ") + first);
  const bool use_cuda = wanted && first.empty();
  if (cfg.compute_backend == "auto")
    b.notes.push_back(use_cuda ? "compute.backend=auto chose cuda"
                               : "compute.backend=auto chose cpu: " +
                                     (first.empty() ? std::string("no GPU wanted") : first));
  return use_cuda;
}

// What this rank sees, for its node's GPU assignment: its visible GPUs (UUIDs, and the CPUs each
// is attached to, from sysfs) and its CPU affinity, under the real host name (pretend hosts of
// test.split_hosts share one machine's GPUs).
nlohmann::json gpu_view(const std::vector<GpuDevice>& devices) {
  nlohmann::json uuids = nlohmann::json::array(), cpus = nlohmann::json::array();
  for (const GpuDevice& d : devices) {
    uuids.push_back(d.uuid);
    std::ifstream list("/sys/bus/pci/devices/" + d.pci_bus_id + "/local_cpulist");
    std::string text;
    std::getline(list, text);
    cpus.push_back(parse_cpulist(text));
  }
  return {{"node", host_name()}, {"uuids", uuids}, {"cpus", cpus}, {"affinity", cpu_affinity()}};
}

// This rank's device under the node's assignment (gpu/gpu_assignment.h).
int assigned_device(const World& world, const std::vector<GpuDevice>& devices) {
  const nlohmann::json mine = gpu_view(devices);
  std::vector<RankGpuView> node;  // this node's ranks, in rank order
  size_t me = 0;
  const std::vector<std::string> all = all_gather_strings(world, mine.dump());
  for (size_t r = 0; r < all.size(); ++r) {
    const nlohmann::json view = nlohmann::json::parse(all[r]);
    if (view.at("node") != mine.at("node")) continue;
    if (int(r) == world.rank) me = node.size();
    node.push_back({view.at("uuids"), view.at("cpus"), view.at("affinity")});
  }
  return assign_gpus(node).at(me).visible_index;
}

GpuPlacement placement_of(const GpuDevice& device) {
  GpuPlacement p{device.uuid, device.pci_bus_id, -1, ""};
  std::ifstream numa("/sys/bus/pci/devices/" + device.pci_bus_id + "/numa_node");
  if (!(numa >> p.numa_node)) p.numa_node = -1;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) p.cuda_visible_devices = visible;
  return p;
}

// Which ranks share a GPU is learned from the devices' UUIDs, not guessed from counts: under
// Slurm's per-task GPU binding every rank sees one device, and all of them are different. A UUID
// is unique across hosts, so ranks on pretend hosts of one machine are seen sharing too.
int choose_device(const World& world, Backends& b) {
  const std::vector<GpuDevice> devices = b.gpu->inventory();
  const int device = assigned_device(world, devices);
  const GpuDevice mine = devices.at(size_t(device));
  b.placement = placement_of(mine);
  const auto all = all_gather_strings(world, mine.uuid);
  b.gpu_sharers = int(std::count(all.begin(), all.end(), mine.uuid));
  // Exclusive or prohibited compute mode lets one process at most use the GPU.
  std::string sharing_problem;
  if (b.gpu_sharers > 1 && mine.compute_mode != 0)
    sharing_problem = "GPU " + std::to_string(device) + " (" + mine.uuid + ") on host " +
                      world.host + " is in an exclusive compute mode, but " +
                      std::to_string(b.gpu_sharers) + " ranks would share it";
  if (!sharing_problem.empty()) sharing_problem += " (run one rank per GPU)";
  agree_or_throw<EnvironmentError>(world, sharing_problem);
  return device;
}

// NCCL refuses two ranks on one GPU: "auto" then takes MPI, an explicit nccl is an error.
bool agree_on_nccl(const TrainConfig& cfg, const World& world, bool use_cuda, int device,
                   Backends& b) {
  std::string mine;
  if (use_cuda && b.gpu_sharers > 1)
    mine = "GPU " + std::to_string(device) + " on host " + world.host + " is shared by " +
           std::to_string(b.gpu_sharers) + " local ranks";
  const std::string first =
      cfg.comm_backend == "mpi" || !use_cuda ? "" : first_problem(world, mine);
  if (cfg.comm_backend == "nccl" && !first.empty())
    throw UsageError("comm.backend=nccl: " + first +
                     " (NCCL needs one GPU per rank; use comm.backend=mpi to share GPUs)");
  const bool use_nccl =
      cfg.comm_backend == "nccl" || (cfg.comm_backend == "auto" && use_cuda && first.empty());
  if (cfg.comm_backend == "auto")
    b.notes.push_back(use_nccl
                          ? "comm.backend=auto chose nccl"
                          : "comm.backend=auto chose mpi" +
                                (use_cuda ? ": " + first : std::string(": compute is on the cpu")));
  return use_nccl;
}

// test.hold_collective: the named rank stops short of the named collective, alive (its watchdog
// still counts), until the job is ended around it.
std::function<void(const std::string&, int64_t)> collective_hold(const TestHooks& test, int rank) {
  if (test.hold_rank != rank) return nullptr;
  return [comm = test.hold_comm, seq = test.hold_seq](const std::string& label, int64_t n) {
    if (label != comm || n != seq) return;
    std::fprintf(stderr, "trainproof: test.hold_collective: holding before %s seq %lld\n",
                 label.c_str(), static_cast<long long>(n));
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  };
}

NcclOptions nccl_options(const TrainConfig& cfg) {
  return {cfg.ranks_per_root, cfg.watchdog_abort_grace_s, process_comm_aborts()};
}

std::unique_ptr<Collective> make_collective(const TrainConfig& cfg, const World& world,
                                            const Heartbeat* heartbeat,
                                            std::shared_ptr<const CommDeadline> deadline,
                                            bool use_cuda, bool use_nccl, Backends& b) {
  const bool oversubscribed = world.local_size > int(online_cpus());
  if (!use_nccl) {
    auto mpi = make_mpi_collective(world, oversubscribed);
    return use_cuda ? b.gpu->stage_through_host(std::move(mpi), *b.compute) : std::move(mpi);
  }
  if (!deadline || !heartbeat) {
    // No watchdog (a sweep): the waits count from their own start; only creating the
    // communicator gets the set-up allowance.
    auto own = std::make_shared<CommDeadline>(cfg.watchdog_timeout_s > 0 ? cfg.watchdog_timeout_s
                                                                         : kWatchdogUntilWarmedUpS);
    auto nccl = b.gpu->make_nccl(world, *b.compute, nccl_options(cfg), own, nullptr);
    own->end_set_up();
    return nccl;
  }
  return b.gpu->make_nccl(world, *b.compute, nccl_options(cfg), deadline,
                          missing_rank_namer(heartbeat->dir(), world.rank, world.size, deadline));
}

void check_dtype_runs(const TrainConfig& cfg, bool use_cuda) {
  if (!use_cuda && cfg.dtype != "fp32")
    throw UsageError("model.dtype=" + cfg.dtype +
                     " needs compute.backend=cuda; the cpu backend computes fp32");
}

std::string gib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", double(bytes) / double(1ull << 30));
  return text;
}

}  // namespace

Backends select_backends(const TrainConfig& cfg, const World& world, const Heartbeat* heartbeat,
                         std::shared_ptr<const CommDeadline> deadline) {
  Backends b;
  const bool use_cuda = agree_on_cuda(cfg, world, b);
  const int device = use_cuda ? choose_device(world, b) : -1;
  const bool use_nccl = agree_on_nccl(cfg, world, use_cuda, device, b);
  check_dtype_runs(cfg, use_cuda);
  if (use_cuda) {
    b.compute = b.gpu->make_compute(device, cfg.dtype);
  } else {
    b.compute = make_cpu_backend();
    b.gpu = nullptr;
  }
  // Each stage's communicators are timed afresh (mpi/comm_timings.h).
  process_comm_times().clear();
  const double started = steady_seconds();
  std::unique_ptr<Collective> made =
      make_collective(cfg, world, heartbeat, std::move(deadline), use_cuda, use_nccl, b);
  process_comm_times().set_up("world", steady_seconds() - started);
  b.comm = with_sequence_numbers(std::move(made), "world", process_ledger(),
                                 collective_hold(cfg.test, world.rank));
  for (const std::string& note : b.comm->set_up_notes()) b.notes.push_back(note);
  return b;
}

std::string expected_comm_backend(const TrainConfig& cfg, const World& world) {
  Backends scratch;
  const bool use_cuda = agree_on_cuda(cfg, world, scratch);
  check_dtype_runs(cfg, use_cuda);
  if (cfg.comm_backend == "mpi" || !use_cuda) return "mpi";
  return cfg.comm_backend == "nccl" ? "nccl" : "";
}

uint64_t gpu_host_staging_bytes(const BackendConfig& bc, bool staged_gradient) {
  const uint64_t batch = 2 * sizeof(float) * uint64_t(bc.local_samples) * bc.seq * bc.hidden;
  const uint64_t gradient = sizeof(float) * uint64_t(bc.layers) * bc.hidden * bc.hidden;
  return batch + (staged_gradient ? gradient : 0);
}

std::string gpu_host_staging_problem(const TrainConfig& cfg, bool staged_gradient,
                                     const HostMemory& memory) {
  const uint64_t needed = memory.model_per_rank * uint64_t(memory.ranks);
  if (!memory.available || double(needed) <= 0.9 * double(*memory.available)) return "";
  return "pinned host staging too large for memory on host " + memory.host + ": " +
         std::to_string(memory.ranks) + " ranks x " + gib(memory.model_per_rank) + " = " +
         gib(needed) + " needed, " + gib(*memory.available) + " available (the batch" +
         (staged_gradient ? " and the whole gradient, reduced over MPI" : "") +
         "; model.hidden=" + std::to_string(cfg.model.hidden) +
         ", model.layers=" + std::to_string(cfg.model.layers) +
         ", model.seq=" + std::to_string(cfg.model.seq) + ")";
}

std::string checkpoint_memory_problem(const TrainConfig& cfg, const HostMemory& memory) {
  if (cfg.checkpoint_dir.empty() || !memory.available) return "";
  CheckpointMemoryPlan plan;
  plan.elements = uint64_t(cfg.model.parameters());
  plan.tensors = cfg.optimizer.kind == OptimizerKind::adam ? 3 : 2;
  plan.writes_from_model = memory.model_on_host && !cfg.checkpoint_async;
  const uint64_t need = checkpoint_memory_need(plan);
  const uint64_t needed = uint64_t(memory.ranks) * (memory.model_per_rank + need);
  if (double(needed) <= 0.9 * double(*memory.available)) return "";
  return "checkpoints do not fit in memory on host " + memory.host +
         ": checkpoint.layout=" + cfg.checkpoint_layout +
         (cfg.checkpoint_shard_optimizer ? ", checkpoint.shard_optimizer=true" : "") +
         ", checkpoint.async=" + (cfg.checkpoint_async ? "true" : "false") + " needs " +
         std::to_string(need) + " bytes per rank (" + gib(need) +
         ") beyond the model's host memory of " + std::to_string(memory.model_per_rank) +
         " bytes; " + std::to_string(memory.ranks) +
         " ranks x (model + checkpoint) = " + std::to_string(needed) + " bytes needed, " +
         std::to_string(*memory.available) +
         " bytes available, 90% of it usable (docs/checkpoint.md, \"Memory\")";
}

void check_memory(const World& world, const Backends& backends, const BackendConfig& bc,
                  const TrainConfig& cfg) {
  const ComputeBackend& backend = *backends.compute;
  // Host-side batch staging (inputs and targets) lives outside the backend.
  const uint64_t staging = 2 * sizeof(float) * uint64_t(bc.local_samples) * bc.seq * bc.hidden;
  const bool on_gpu = backends.gpu != nullptr;
  const uint64_t per_rank = backend.bytes_needed(bc) + (on_gpu ? 0 : staging);
  const int sharers = on_gpu ? backends.gpu_sharers : world.local_size;
  const uint64_t needed = per_rank * uint64_t(sharers);
  const std::optional<uint64_t> host_available =
      cfg.test.host_memory_bytes > 0 ? std::optional<uint64_t>(cfg.test.host_memory_bytes)
                                     : meminfo_bytes("MemAvailable");
  const auto available = on_gpu ? backend.memory_available() : host_available;
  std::string problem;
  if (available && double(needed) > 0.9 * double(*available))
    problem = "model too large for " + std::string(on_gpu ? "GPU memory" : "memory") + " on host " +
              world.host + ": " + std::to_string(sharers) + " ranks x " + gib(per_rank) + " = " +
              gib(needed) + " needed, " + gib(*available) +
              " available (model.layers=" + std::to_string(cfg.model.layers) +
              ", model.hidden=" + std::to_string(cfg.model.hidden) +
              ", model.seq=" + std::to_string(cfg.model.seq) +
              ", model.batch=" + std::to_string(cfg.model.global_batch) + ")";
  const bool staged_gradient = on_gpu && backends.comm->name() == "mpi";
  const uint64_t host_per_rank = on_gpu ? gpu_host_staging_bytes(bc, staged_gradient) : per_rank;
  if (problem.empty() && on_gpu)
    problem = gpu_host_staging_problem(
        cfg, staged_gradient,
        HostMemory{host_per_rank, world.local_size, host_available, world.host});
  // Checkpoint buffers are host memory, whether the model lives there or on a GPU.
  if (problem.empty())
    problem = checkpoint_memory_problem(
        cfg, on_gpu ? HostMemory{host_per_rank, world.local_size, host_available, world.host}
                    : HostMemory{per_rank, sharers, available, world.host, true});
  agree_or_throw<UsageError>(world, problem);
}

void initialize_model(const TrainConfig& cfg, const World& world, const Backends& backends,
                      BatchShare share) {
  const BackendConfig bc{cfg.model.layers, cfg.model.hidden, cfg.model.seq, cfg.model.global_batch,
                         share.samples,    cfg.seed,         cfg.optimizer};
  check_memory(world, backends, bc, cfg);
  backends.compute->initialize(bc);
}

}  // namespace tp
