#pragma once
// The NCCL a node would load (libnccl.so.2 on the library path, as the GPU plugin loads it), asked
// through ncclGetVersion without creating a communicator: "2.28.9", or "" with `why` set when
// there is none.
#include <string>

namespace tp {

std::string nccl_library_version(std::string& why);

}  // namespace tp
