#include "gpu/gpu_copies.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <functional>

#include "common/cuda_check.h"

namespace tp {
namespace {

// 1 GiB within device memory (well past every cache), 256 MiB across PCIe: each copy is long
// enough that launch costs vanish, short enough that a second holds many.
constexpr size_t kDeviceBytes = size_t(1) << 30;
constexpr size_t kHostBytes = size_t(256) << 20;
constexpr size_t kPeerBytes = size_t(256) << 20;

// Frees what it holds whatever way the measurement leaves.
struct CudaBuffers {
  void* device_a = nullptr;
  void* device_b = nullptr;
  void* host = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  ~CudaBuffers() {
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (stream) cudaStreamDestroy(stream);
    if (device_a) cudaFree(device_a);
    if (device_b) cudaFree(device_b);
    if (host) cudaFreeHost(host);
  }
};

// Bytes a second of `copy` (one call moves `bytes`), doubling the count of copies timed together
// until they take `seconds`; one untimed copy first wakes the copy engine and the link.
double rate_of(CudaBuffers& b, size_t bytes, double seconds, const std::function<void()>& copy) {
  copy();
  cudaCheck(cudaStreamSynchronize(b.stream));
  for (int count = 1;; count *= 2) {
    cudaCheck(cudaEventRecord(b.start, b.stream));
    for (int i = 0; i < count; ++i) copy();
    cudaCheck(cudaEventRecord(b.stop, b.stream));
    cudaCheck(cudaEventSynchronize(b.stop));
    float ms = 0;
    cudaCheck(cudaEventElapsedTime(&ms, b.start, b.stop));
    if (ms * 1e-3 >= seconds || count >= (1 << 16))
      return ms > 0 ? double(bytes) * count / (ms * 1e-3) : 0;
  }
}

void make_stream(CudaBuffers& b) {
  cudaCheck(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking));
  cudaCheck(cudaEventCreate(&b.start));
  cudaCheck(cudaEventCreate(&b.stop));
}

}  // namespace

GpuCopyRates measure_copies(int device, double seconds) {
  cudaCheck(cudaSetDevice(device));
  CudaBuffers b;
  make_stream(b);
  cudaCheck(cudaMalloc(&b.device_a, kDeviceBytes));
  cudaCheck(cudaMalloc(&b.device_b, kDeviceBytes));
  cudaCheck(cudaMemsetAsync(b.device_a, 1, kDeviceBytes, b.stream));
  // Pinned, and first touched by this thread, whose caller placed it on the GPU's NUMA node.
  cudaCheck(cudaMallocHost(&b.host, kHostBytes));
  std::fill_n(static_cast<unsigned char*>(b.host), kHostBytes, static_cast<unsigned char>(1));
  GpuCopyRates r;
  // Each byte of a device-to-device copy is read once and written once.
  r.device_gbps = 2 *
                  rate_of(b, kDeviceBytes, seconds,
                          [&] {
                            cudaCheck(cudaMemcpyAsync(b.device_b, b.device_a, kDeviceBytes,
                                                      cudaMemcpyDeviceToDevice, b.stream));
                          }) /
                  1e9;
  r.h2d_gbps = rate_of(b, kHostBytes, seconds,
                       [&] {
                         cudaCheck(cudaMemcpyAsync(b.device_a, b.host, kHostBytes,
                                                   cudaMemcpyHostToDevice, b.stream));
                       }) /
               1e9;
  r.d2h_gbps = rate_of(b, kHostBytes, seconds,
                       [&] {
                         cudaCheck(cudaMemcpyAsync(b.host, b.device_a, kHostBytes,
                                                   cudaMemcpyDeviceToHost, b.stream));
                       }) /
               1e9;
  return r;
}

double measure_peer_copy(int source, int destination, double seconds) {
  int reach = 0;
  cudaCheck(cudaDeviceCanAccessPeer(&reach, destination, source));
  if (!reach) return 0;
  cudaCheck(cudaSetDevice(destination));
  if (const cudaError_t e = cudaDeviceEnablePeerAccess(source, 0);
      e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
    cudaCheck(e);
  cudaGetLastError();  // an "already enabled" answer stays the last error otherwise
  CudaBuffers from;    // on the source; cudaFree finds its device by the unified address
  cudaCheck(cudaSetDevice(source));
  cudaCheck(cudaMalloc(&from.device_a, kPeerBytes));
  cudaCheck(cudaMemset(from.device_a, 1, kPeerBytes));
  cudaCheck(cudaSetDevice(destination));
  CudaBuffers to;
  make_stream(to);
  cudaCheck(cudaMalloc(&to.device_a, kPeerBytes));
  const double rate = rate_of(to, kPeerBytes, seconds, [&] {
    cudaCheck(cudaMemcpyPeerAsync(to.device_a, destination, from.device_a, source, kPeerBytes,
                                  to.stream));
  });
  return rate / 1e9;
}

}  // namespace tp
