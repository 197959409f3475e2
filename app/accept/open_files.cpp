#include "app/accept/open_files.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>

namespace tp {

OpenFileLimit ensure_open_files(uint64_t need) {
  OpenFileLimit limit;
  rlimit now{};
  if (getrlimit(RLIMIT_NOFILE, &now) != 0) {
    limit.problem = std::string("getrlimit(RLIMIT_NOFILE): ") + std::strerror(errno);
    return limit;
  }
  limit.soft_before = limit.soft = uint64_t(now.rlim_cur);
  limit.hard = uint64_t(now.rlim_max);
  if (now.rlim_cur == RLIM_INFINITY || limit.soft >= need) return limit;
  rlimit raised = now;
  raised.rlim_cur =
      now.rlim_max == RLIM_INFINITY || limit.hard >= need ? rlim_t(need) : now.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &raised) != 0) {
    limit.problem = std::string("setrlimit(RLIMIT_NOFILE): ") + std::strerror(errno);
    return limit;
  }
  limit.soft = uint64_t(raised.rlim_cur);
  return limit;
}

}  // namespace tp
