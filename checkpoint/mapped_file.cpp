#include "checkpoint/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/digest.h"
#include "common/files.h"

namespace tp {
namespace {

// Why `name` cannot be used as a regular file, from what it is before it is opened: a FIFO or a
// device is refused without the open that could block or act on it. "" for a regular file.
std::string not_regular(int folder_fd, const std::string& name, const std::string& path) {
  struct stat info {};
  if (::fstatat(folder_fd, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0)
    return "cannot open " + path + ": " + std::strerror(errno);
  if (S_ISLNK(info.st_mode)) return path + " is a symbolic link";
  if (!S_ISREG(info.st_mode))
    return path + " is not a regular file (" + file_kind(info.st_mode) + ")";
  return "";
}

}  // namespace

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

CheckpointFolder::CheckpointFolder(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd_ >= 0) return;
  const int error = errno;
  struct stat info {};
  if (::lstat(path_.c_str(), &info) == 0 && S_ISLNK(info.st_mode))
    problem_ = path_ + " is a symbolic link";
  else
    problem_ = "cannot open the folder " + path_ + ": " + std::strerror(error);
}

CheckpointFolder::~CheckpointFolder() {
  if (fd_ >= 0) ::close(fd_);
}

ReadOnlyFile CheckpointFolder::open_file(const std::string& name, std::string& why) const {
  const std::string path = path_of(name);
  if (fd_ < 0) {
    why = problem_;
    return {};
  }
  why = not_regular(fd_, name, path);
  if (!why.empty()) return {};
  // The file may have been replaced since: O_NOFOLLOW refuses a symlink, O_NONBLOCK keeps a FIFO
  // from blocking the open, and the opened descriptor itself must be a regular file.
  const int fd =
      ::openat(fd_, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    why = errno == ELOOP ? path + " is a symbolic link"
                         : "cannot open " + path + ": " + std::strerror(errno);
    return {};
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    why = path + " is not a regular file (" + file_kind(info.st_mode) + ")";
    ::close(fd);
    return {};
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return ReadOnlyFile(fd, info);
}

bool CheckpointFolder::still_names(const std::string& name, const ReadOnlyFile& file) const {
  struct stat now {};
  return fd_ >= 0 && ::fstatat(fd_, name.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 &&
         now.st_dev == file.info().st_dev && now.st_ino == file.info().st_ino;
}

void drop_page_cache(const ReadOnlyFile& file) {
  if (file.is_open()) ::posix_fadvise(file.fd(), 0, 0, POSIX_FADV_DONTNEED);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

bool MappedFile::map_and_hash(const ReadOnlyFile& file, const std::string& path, std::string& why) {
  size_ = size_t(file.size());
  if (size_ > 0) {
    ::posix_fadvise(file.fd(), 0, 0, POSIX_FADV_SEQUENTIAL);
    void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file.fd(), 0);
    if (mapped == MAP_FAILED) {
      why = "cannot map " + path + ": " + std::strerror(errno);
      size_ = 0;
      return false;
    }
    data_ = static_cast<unsigned char*>(mapped);
    ::madvise(data_, size_, MADV_WILLNEED);
  }
  checksum_ = digest_of(data_, size_).hex();
  return true;
}

}  // namespace tp
