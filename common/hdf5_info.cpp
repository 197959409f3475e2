#include "common/hdf5_info.h"

#include <hdf5.h>

namespace tp {

std::string hdf5_version() {
  unsigned major = 0, minor = 0, release = 0;
  if (H5get_libversion(&major, &minor, &release) < 0) return "unknown";
  std::string version =
      std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
#ifdef H5_HAVE_PARALLEL
  version += " (parallel)";
#endif
  return version;
}

}  // namespace tp
