#include "gpu/gpu_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>

namespace tp {

const GpuLibrary& load_gpu_library() {
  static const GpuLibrary library = [] {
    GpuLibrary lib;
    if (const char* env = std::getenv("TRAINPROOF_GPU_LIB"); env && *env) {
      lib.path = env;
    } else {
      std::error_code ec;
      const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
      lib.path = (ec ? std::filesystem::path(".") : exe.parent_path()) / "libtrainproof_gpu.so";
    }
    void* handle = dlopen(lib.path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = dlerror();
      lib.error = why ? why : "dlopen failed";
      return lib;
    }
    using Entry = const GpuApi* (*)();
    auto entry = reinterpret_cast<Entry>(dlsym(handle, "trainproof_gpu_api"));
    if (!entry) {
      lib.error = lib.path + " has no trainproof_gpu_api entry point";
      return lib;
    }
    const GpuApi* api = entry();
    if (!api || api->version != kGpuApiVersion) {
      lib.error = lib.path + " is from another trainproof build (API version " +
                  std::to_string(api ? api->version : -1) + ", expected " +
                  std::to_string(kGpuApiVersion) + ")";
      return lib;
    }
    lib.api = api;
    return lib;
  }();
  return library;
}

std::string missing_gpu_driver() {
  if (const char* env = std::getenv("TRAINPROOF_GPU_LIB"); env && *env) return "";
  std::error_code ec;
  for (const char* node : {"/dev/nvidiactl", "/dev/dxg"})
    if (std::filesystem::exists(node, ec)) return "";
  return "no NVIDIA driver on this host (neither /dev/nvidiactl nor /dev/dxg exists)";
}

}  // namespace tp
