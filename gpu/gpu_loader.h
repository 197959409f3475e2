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

}  // namespace tp
