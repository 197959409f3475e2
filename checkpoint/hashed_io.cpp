#include "checkpoint/hashed_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/errors.h"

namespace tp {
namespace {

// Small enough to stay in the last-level cache between hashing and copying, large enough that
// the system calls cost nothing next to the bytes.
constexpr uint64_t kPieceBytes = uint64_t(4) << 20;

}  // namespace

void write_hashed(int fd, const std::string& path, uint64_t offset, const void* data,
                  uint64_t bytes, DigestBuilder& digest) {
  const auto* bytes_at = static_cast<const unsigned char*>(data);
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t piece = std::min(kPieceBytes, bytes - done);
    digest.add(bytes_at + done, piece);
    for (uint64_t put = 0; put < piece;) {
      const ssize_t n =
          ::pwrite(fd, bytes_at + done + put, piece - put, off_t(offset + done + put));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0)
        throw RuntimeError("cannot write " + std::to_string(piece - put) + " bytes at offset " +
                           std::to_string(offset + done + put) + " of '" + path +
                           "': " + std::strerror(n < 0 ? errno : EIO));
      put += uint64_t(n);
    }
    start_writeback(fd, offset + done, piece);
    done += piece;
  }
}

void start_writeback(int fd, uint64_t offset, uint64_t bytes) {
  (void)::sync_file_range(fd, off_t(offset), off_t(bytes), SYNC_FILE_RANGE_WRITE);
}

void read_hashed(int fd, const std::string& path, uint64_t offset, void* data, uint64_t bytes,
                 DigestBuilder& digest) {
  // The whole region is wanted, in order: the kernel reads ahead all of it instead of growing its
  // window from a few pages, so a cold read streams at the device's pace. Advice only.
  (void)::posix_fadvise(fd, off_t(offset), off_t(bytes), POSIX_FADV_SEQUENTIAL);
  (void)::posix_fadvise(fd, off_t(offset), off_t(bytes), POSIX_FADV_WILLNEED);
  auto* bytes_at = static_cast<unsigned char*>(data);
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t piece = std::min(kPieceBytes, bytes - done);
    for (uint64_t got = 0; got < piece;) {
      const ssize_t n = ::pread(fd, bytes_at + done + got, piece - got, off_t(offset + done + got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        throw RuntimeError("cannot read '" + path + "' at offset " +
                           std::to_string(offset + done + got) + ": " + std::strerror(errno));
      if (n == 0)
        throw RuntimeError(path + " ends at " + std::to_string(offset + done + got) +
                           " bytes, inside a slab that reaches " + std::to_string(offset + bytes));
      got += uint64_t(n);
    }
    digest.add(bytes_at + done, piece);
    done += piece;
  }
}

}  // namespace tp
