#pragma once
// The CUDA compute backend: a ComputeBackend that is also the DeviceStream the GPU library's
// collectives order themselves on. Only GPU-library sources see this.
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>

#include "common/device_stream.h"
#include "kernels/compute_backend.h"
#include "kernels/grad_shaping.h"

namespace tp {

class CudaBackendBase : public ComputeBackend, public DeviceStream {};

std::unique_ptr<ComputeBackend> make_cuda_backend(int device, const std::string& dtype);

// Device-side passes exposed for the GPU unit tests, which compare them with the CPU definitions.
namespace cuda_test {
void shape_and_accumulate(const float* host_grads, float* host_accumulator, size_t n,
                          const GradGrid& grid);
void optimizer(const OptimizerConfig& o, int64_t step, float* host_w, float* host_m, float* host_v,
               const float* host_g, size_t n);
}  // namespace cuda_test

}  // namespace tp
