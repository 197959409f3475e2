#include "node/kernel_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

namespace tp {
namespace {

// Bounded: the kernel's buffer is at most a few MiB, and a test file must not make it more.
constexpr size_t kMaxBytes = 16u << 20;

long long monotonic_us() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<long long>(t.tv_sec) * 1000000 + t.tv_nsec / 1000;
}

}  // namespace

KernelLog read_kernel_log(const std::string& path) {
  KernelLog log;
  log.now_us = monotonic_us();
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    log.unreadable = path + ": " + std::strerror(errno);
    return log;
  }
  // /dev/kmsg returns one record per read, starting at the oldest it still holds; EAGAIN at the
  // end, EPIPE for a record overwritten while reading (the next read goes on). A file returns 0.
  char buffer[8192];
  while (log.records.size() < kMaxBytes) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got > 0) {
      log.records.append(buffer, size_t(got));
      if (buffer[got - 1] != '\n' && path == "/dev/kmsg") log.records += '\n';
      continue;
    }
    if (got < 0 && errno == EPIPE) continue;
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && errno != EAGAIN) log.unreadable = path + ": " + std::strerror(errno);
    break;
  }
  ::close(fd);
  return log;
}

}  // namespace tp
