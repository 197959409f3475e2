#pragma once
// The boundary between trainproof and its run-time-loaded GPU backend (libtrainproof_gpu.so).
// The binary links no CUDA; it dlopens the library only when a GPU backend is asked for and reaches
// everything through this table. Both sides are built from one tree by one compiler, so C++ types
// cross the boundary; kGpuApiVersion catches a library left over from another build.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/compute_backend.h"
#include "mpi/collective.h"
#include "mpi/comm_deadline.h"
#include "mpi/nccl_roots.h"

namespace tp {

struct World;

inline constexpr int kGpuApiVersion = 5;

struct GpuDevice {
  int index = 0;
  std::string name;
  std::string uuid;        // "GPU-xxxxxxxx-xxxx-..."
  std::string pci_bus_id;  // "0000:1b:00.0"
  uint64_t memory_bytes = 0;
  int sm_count = 0;
  int sm_clock_mhz = 0;        // maximum SM clock the runtime reports
  int memory_clock_mhz = 0;    // maximum memory clock
  int compute_capability = 0;  // 90 for sm_90
  int compute_mode = 0;        // cudaComputeMode: 0 default (shareable), else exclusive/prohibited
};

struct GpuVersions {
  int cuda_runtime = 0;  // e.g. 13000
  int cuda_driver = 0;   // the CUDA version the driver supports
  int nccl = 0;          // e.g. 22809
};

// A device's copy rates in GB/s (10^9 bytes a second; docs/node-check.md, "Memory and copies").
// device: a copy within its memory, each byte read and written once (2 x bytes / time); h2d and
// d2h: to and from pinned host memory the calling thread allocated (its NUMA node's).
struct GpuCopyRates {
  double device_gbps = 0, h2d_gbps = 0, d2h_gbps = 0;
};

struct GpuApi {
  int version;
  const char* build_revision;
  // Visible devices. Throws RuntimeError carrying the CUDA error when none can be used.
  int (*device_count)();
  std::vector<GpuDevice> (*inventory)();
  GpuVersions (*versions)();
  // A cuBLAS backend on `device` computing in `dtype` (fp32, bf16, fp16).
  std::unique_ptr<ComputeBackend> (*make_compute)(int device, const std::string& dtype);
  // NCCL over all ranks of `world`, on `compute`'s device, ordered after its stream, set up as
  // `options` asks (mpi/nccl_roots.h). A reduction or set-up that waits longer than `deadline`
  // allows is aborted (ncclCommAbort) after `on_timeout(what)` has named the ranks that did not
  // arrive; its answer joins the error.
  std::unique_ptr<Collective> (*make_nccl)(
      const World& world, ComputeBackend& compute, const NcclOptions& options,
      std::shared_ptr<const CommDeadline> deadline,
      std::function<std::string(const std::string&)> on_timeout);
  // Wraps a host-memory collective (MPI) so it reduces `compute`'s device gradients by staging
  // them through pinned host buffers.
  std::unique_ptr<Collective> (*stage_through_host)(std::unique_ptr<Collective> host_collective,
                                                    ComputeBackend& compute);
  // `device`'s copy rates, each measured for at least `seconds`. Throws RuntimeError naming the
  // CUDA call that failed.
  GpuCopyRates (*measure_copies)(int device, double seconds);
  // GB/s of copies from `source`'s memory to `destination`'s over their peer path (NVLink, or
  // PCIe through the switch or root complex) for at least `seconds`; 0 when neither can reach
  // the other's memory directly.
  double (*measure_peer_copy)(int source, int destination, double seconds);
};

}  // namespace tp

extern "C" const tp::GpuApi* trainproof_gpu_api();
