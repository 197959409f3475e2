#pragma once
// Finds and loads libtrainproof_gpu.so: $TRAINPROOF_GPU_LIB when set, else next to the running
// binary. Never unloaded: objects it made live until exit.
#include <string>

#include "gpu/gpu_api.h"

namespace tp {

struct GpuLibrary {
  const GpuApi* api = nullptr;  // null when it could not be loaded
  std::string path;             // where it was looked for
  std::string error;            // why it could not be loaded
};

const GpuLibrary& load_gpu_library();

// Device for a rank: its local rank modulo the visible devices. NCCL needs one rank per GPU;
// under MPI several ranks may share one (README, "GPUs: CUDA and NCCL").
inline int device_for_local_rank(int local_rank, int device_count) {
  return device_count > 0 ? local_rank % device_count : -1;
}

}  // namespace tp
