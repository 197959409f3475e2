#include "checkpoint/storage_space.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/errors.h"
#include "common/files.h"

namespace tp {

void reserve_file_space(int fd, uint64_t bytes, const std::string& path) {
  if (bytes == 0) return;
  int rc = 0;
  do {
    rc = ::fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, off_t(bytes));
  } while (rc != 0 && errno == EINTR);
  if (rc == 0 || errno == EOPNOTSUPP || errno == ENOSYS) return;
  throw RuntimeError("cannot reserve " + std::to_string(bytes) + " bytes for '" + path +
                     "': " + std::strerror(errno));
}

double write_durably(const std::string& path, const void* data, size_t size,
                     const AlignedClock& clock, const std::function<void()>& midway) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw RuntimeError("cannot create '" + path + "': " + std::strerror(errno));
  const auto* bytes = static_cast<const char*>(data);
  const size_t half = midway ? size / 2 : size;
  try {
    reserve_file_space(fd, size, path);
    write_all(fd, bytes, half, path);
    if (midway) midway();
    write_all(fd, bytes + half, size - half, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  const double before = clock.local_now();
  const int rc = ::fsync(fd);
  const double fsync_s = clock.local_now() - before;
  ::close(fd);
  if (rc != 0) throw RuntimeError("fsync '" + path + "': " + std::strerror(errno));
  return fsync_s;
}

uint64_t free_bytes(const std::string& path) {
  struct statvfs info {};
  if (::statvfs(path.c_str(), &info) != 0)
    throw RuntimeError("cannot ask the free space of '" + path + "': " + std::strerror(errno));
  return uint64_t(info.f_bavail) * uint64_t(info.f_frsize);
}

uint64_t bytes_under(const std::string& folder) {
  namespace fs = std::filesystem;
  uint64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) {
      const auto size = it->file_size(size_ec);
      if (!size_ec) total += uint64_t(size);
    }
  }
  return total;
}

}  // namespace tp
