#include "gpu/nccl_version.h"

#include <dlfcn.h>

namespace tp {

std::string nccl_library_version(std::string& why) {
  void* handle = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* error = dlerror();
    why = error ? error : "libnccl.so.2: dlopen failed";
    return "";
  }
  using GetVersion = int (*)(int*);
  const auto get = reinterpret_cast<GetVersion>(dlsym(handle, "ncclGetVersion"));
  int code = 0;
  if (!get || get(&code) != 0 || code <= 0) {
    why = "libnccl.so.2: ncclGetVersion failed";
    return "";
  }
  // NCCL 2.9 and later encode X.Y.Z as X * 10000 + Y * 100 + Z; older ones as X * 1000 + Y * 100.
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? code / 100 % 100 : code / 100 % 10;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

}  // namespace tp
