#pragma once
// Debian's HDF5 (serial and parallel) is built without thread safety, and the async checkpoint
// writer calls it from a second thread: every HDF5 call in this process holds this one lock.
#include <mutex>

namespace tp {

inline std::mutex& hdf5_lock() {
  static std::mutex lock;
  return lock;
}

}  // namespace tp
