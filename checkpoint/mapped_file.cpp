#include "checkpoint/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/digest.h"

namespace tp {

void drop_page_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;  // the read below reports the missing file
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

bool MappedFile::map_and_hash(const std::string& path, std::string& why) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    why = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  struct stat info {};
  const bool ok = ::fstat(fd, &info) == 0;
  size_ = ok ? size_t(info.st_size) : 0;
  if (ok && size_ > 0) {
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    data_ = mapped == MAP_FAILED ? nullptr : static_cast<unsigned char*>(mapped);
  }
  const std::string error = std::strerror(errno);
  ::close(fd);
  if (!ok || (size_ > 0 && data_ == nullptr)) {
    why = "cannot map " + path + ": " + error;
    return false;
  }
  if (data_ != nullptr) ::madvise(data_, size_, MADV_WILLNEED);
  checksum_ = digest_of(data_, size_).hex();
  return true;
}

}  // namespace tp
