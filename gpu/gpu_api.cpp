// The entry point of libtrainproof_gpu.so: the table trainproof reaches the GPU backend through.
#include "gpu/gpu_api.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>

#include "common/cuda_check.h"
#include "gpu/gpu_copies.h"
#include "kernels/cuda_backend.h"
#include "mpi/gpu_collectives.h"

namespace tp {

namespace {

// The table takes compute backends; the collectives need only their device side.
std::unique_ptr<Collective> make_nccl(const World& world, ComputeBackend& compute,
                                      const NcclOptions& options,
                                      std::shared_ptr<const CommDeadline> deadline,
                                      std::function<std::string(const std::string&)> on_timeout) {
  auto* device = dynamic_cast<DeviceStream*>(&compute);
  if (!device) throw UsageError("comm.backend=nccl needs compute.backend=cuda");
  return make_nccl_collective(world, *device, options, std::move(deadline), std::move(on_timeout));
}

std::unique_ptr<Collective> stage_through_host(std::unique_ptr<Collective> inner,
                                               ComputeBackend& compute) {
  auto* device = dynamic_cast<DeviceStream*>(&compute);
  if (!device) return inner;  // host gradients need no staging
  return stage_collective_through_host(std::move(inner), *device);
}

int device_count() {
  int count = 0;
  cudaCheck(cudaGetDeviceCount(&count));
  if (count == 0) throw RuntimeError("no CUDA device is visible (CUDA_VISIBLE_DEVICES?)");
  return count;
}

std::string format_uuid(const cudaUUID_t& uuid) {
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  char text[64];
  std::snprintf(text, sizeof text,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return text;
}

std::vector<GpuDevice> inventory() {
  std::vector<GpuDevice> devices;
  const int count = device_count();
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    cudaCheck(cudaGetDeviceProperties(&prop, d));
    GpuDevice g;
    g.index = d;
    g.name = prop.name;
    g.uuid = format_uuid(prop.uuid);
    char bus[32];
    std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.0", prop.pciDomainID, prop.pciBusID,
                  prop.pciDeviceID);
    g.pci_bus_id = bus;
    g.memory_bytes = prop.totalGlobalMem;
    g.sm_count = prop.multiProcessorCount;
    g.compute_capability = prop.major * 10 + prop.minor;
    cudaDeviceGetAttribute(&g.compute_mode, cudaDevAttrComputeMode, d);
    int khz = 0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, d) == cudaSuccess)
      g.sm_clock_mhz = khz / 1000;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, d) == cudaSuccess)
      g.memory_clock_mhz = khz / 1000;
    devices.push_back(g);
  }
  return devices;
}

GpuVersions versions() {
  GpuVersions v;
  cudaRuntimeGetVersion(&v.cuda_runtime);
  cudaDriverGetVersion(&v.cuda_driver);
  ncclGetVersion(&v.nccl);
  return v;
}

const GpuApi kApi = {
    kGpuApiVersion, TRAINPROOF_GIT_REVISION_STRING,
    device_count,   inventory,
    versions,       make_cuda_backend,
    make_nccl,      stage_through_host,
    measure_copies, measure_peer_copy,
};

}  // namespace
}  // namespace tp

extern "C" const tp::GpuApi* trainproof_gpu_api() {
  return &tp::kApi;
}
