#pragma once
// What the GPU library's collectives need from its compute backend: the device, the stream that
// orders all compute work, and the gradient buffer's extent. Only GPU-library sources see this.
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>

#include "kernels/compute_backend.h"
#include "kernels/grad_shaping.h"

namespace tp {

class CudaBackendBase : public ComputeBackend {
 public:
  virtual int device_index() const = 0;
  virtual cudaStream_t stream() const = 0;
  virtual size_t gradient_count() const = 0;
};

std::unique_ptr<ComputeBackend> make_cuda_backend(int device, const std::string& dtype);

// Device-side passes exposed for the GPU unit tests, which compare them with the CPU definitions.
namespace cuda_test {
void shape_and_accumulate(const float* host_grads, float* host_accumulator, size_t n,
                          const GradGrid& grid);
void optimizer(const OptimizerConfig& o, int64_t step, float* host_w, float* host_m, float* host_v,
               const float* host_g, size_t n);
}  // namespace cuda_test

}  // namespace tp
