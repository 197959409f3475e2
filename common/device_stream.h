#pragma once
// What a collective on device memory needs from the compute side: the device, the stream that
// orders all compute work, and the gradient buffer's extent. The CUDA backend implements it;
// it is defined below both so the collectives never see a compute backend (docs/architecture.md,
// "Layers"). Only sources of the GPU library include it.
#include <cuda_runtime.h>

#include <cstddef>

namespace tp {

class DeviceStream {
 public:
  virtual ~DeviceStream() = default;
  virtual int device_index() const = 0;
  virtual cudaStream_t stream() const = 0;
  // The flat gradient buffer on the device, and its length in floats.
  virtual float* gradients() = 0;
  virtual size_t gradient_count() const = 0;
};

}  // namespace tp
