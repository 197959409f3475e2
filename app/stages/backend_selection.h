#pragma once
// Which compute backend and which collective a run uses. Every rank takes the same decision: a
// choice that holds on one host but not another (GPUs present, enough of them for NCCL) is agreed
// over all ranks before anything is created.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpu/gpu_api.h"
#include "kernels/compute_backend.h"
#include "kernels/model_spec.h"
#include "mpi/collective.h"
#include "mpi/world.h"
#include "train/heartbeat.h"
#include "train/train_config.h"

namespace tp {

// The GPU a rank drives, as the report records it (docs/report.md, ranks[].gpu).
struct GpuPlacement {
  std::string uuid;
  std::string pci_bus_id;
  int numa_node = -1;                // sysfs numa_node of its PCI device; -1 when not reported
  std::string cuda_visible_devices;  // the variable as this rank saw it; "" when unset
};

struct Backends {
  std::unique_ptr<ComputeBackend> compute;
  std::unique_ptr<Collective> comm;
  std::vector<std::string> notes;  // why an "auto" choice went the way it did
  const GpuApi* gpu = nullptr;     // set when the GPU library is loaded and a device is usable
  int device_count = 0;
  int gpu_sharers = 1;                    // ranks of this host computing on this rank's GPU
  std::optional<GpuPlacement> placement;  // set when the rank computes on a GPU
};

// Throws UsageError or EnvironmentError (agreed on every rank) when the requested backends
// cannot run here. The watchdog's evidence (heartbeats in `heartbeat`'s folder) names the ranks
// an NCCL deadline waited for; without heartbeats (a sweep) the deadline's error names none.
// `deadline`: the watchdog's (Watchdog::comm_deadline); null without one.
Backends select_backends(const TrainConfig& config, const World& world, const Heartbeat* heartbeat,
                         std::shared_ptr<const CommDeadline> deadline = nullptr);

// Collective, before anything runs (accept checks it before its first stage): as far as it can be
// known without creating the backends, throws what select_backends would (a job whose ranks
// disagree about having a GPU, under auto, is exit 3; a 16-bit model.dtype on the CPU exit 2).
// Returns the collective the run will get, "mpi" or "nccl", or "" when only creating it will tell
// (auto on GPUs: NCCL unless ranks share a GPU).
std::string expected_comm_backend(const TrainConfig& config, const World& world);

// Pure: under compute.backend=auto, "" when every rank or no rank has a usable GPU, else the
// error that names the hosts without one (the first 8, and how many more). A job whose ranks
// disagree would otherwise fall back to the CPU on every rank, and a GPU gate would fail with no
// visible cause. `has_gpu[r]` is rank r's; `host_of_rank[r]` its host.
std::string mixed_gpu_problem(const std::vector<std::string>& host_of_rank,
                              const std::vector<bool>& has_gpu);

// The host memory a rank's share of the host holds for the model (0 when it lives on a GPU).
struct HostMemory {
  uint64_t model_per_rank = 0;
  int ranks = 1;  // ranks of this host
  std::optional<uint64_t> available;
  std::string host;
  bool model_on_host = false;  // the state lives in host memory (cpu backend), not on a GPU
};
// "" or why this host cannot hold the checkpoints' buffers (docs/checkpoint.md, "Memory")
// beside the model: names the options, the bytes needed and the bytes available.
std::string checkpoint_memory_problem(const TrainConfig& config, const HostMemory& memory);

// A GPU rank's pinned host memory: its batch, and with `staged_gradient` (MPI reducing device
// gradients through the host) the whole gradient.
uint64_t gpu_host_staging_bytes(const BackendConfig& backend, bool staged_gradient);
// "" or why `memory.ranks` GPU ranks of one host, each holding `memory.model_per_rank` bytes of
// pinned staging, do not fit in 90% of its available memory.
std::string gpu_host_staging_problem(const TrainConfig& config, bool staged_gradient,
                                     const HostMemory& memory);

// Refuses, on every rank alike, a model that would not fit in the memory its ranks share: the
// host's RAM for the CPU backend, a device's free memory for the CUDA backend.
void check_memory(const World& world, const Backends& backends, const BackendConfig& backend,
                  const TrainConfig& config);

// The model at step 0, from train.seed, in this rank's share of the batch: checked against the
// memory first (check_memory).
void initialize_model(const TrainConfig& config, const World& world, const Backends& backends,
                      BatchShare share);

}  // namespace tp
