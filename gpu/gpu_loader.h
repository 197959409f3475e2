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

// "" when this host shows an NVIDIA driver's device node (/dev/nvidiactl, or /dev/dxg under WSL)
// or $TRAINPROOF_GPU_LIB names a library to try; otherwise why there is no GPU to look for.
// Loading the library pulls in the CUDA runtime and NCCL, seconds of start-up per rank on a
// CPU-only host, only to learn that no device exists.
std::string missing_gpu_driver();

}  // namespace tp
