#pragma once
// Seconds as doubles: steady for durations on one host, system (Unix time) for records that
// another process or host reads.
#include <chrono>

namespace tp {

inline double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace tp
