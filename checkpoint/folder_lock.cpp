#include "checkpoint/folder_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>
#include <thread>
#include <utility>

#include "common/errors.h"

namespace tp {
namespace {

// How often a busy lock is tried again while waiting.
constexpr auto kRetryEvery = std::chrono::milliseconds(100);

bool refused_by_filesystem(int error) {
  // ENOSYS: Lustre mounted with noflock; EOPNOTSUPP: filesystems without flock; ENOLCK: NFS whose
  // lock manager cannot be reached.
  return error == ENOSYS || error == EOPNOTSUPP || error == ENOLCK;
}

std::string read_holder(int fd) {
  char text[256];
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  return describe_lock_holder(n > 0 ? std::string(text, size_t(n)) : std::string());
}

}  // namespace

std::string describe_lock_holder(const std::string& file_text) {
  std::istringstream in(file_text);
  std::string host;
  long long pid = 0;
  if (!(in >> host >> pid) || pid <= 0) return "an unknown holder";
  return "host " + host + ", pid " + std::to_string(pid);
}

FolderLock FolderLock::take(const std::string& path, double wait_s, const std::string& host,
                            const std::function<void(const std::string&)>& on_wait) {
  FolderLock lock;
  lock.fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock.fd_ < 0)
    throw RuntimeError("cannot open the lock file '" + path + "': " + std::strerror(errno));
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(wait_s));
  bool announced = false;
  while (::flock(lock.fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    if (error == EINTR) continue;
    if (refused_by_filesystem(error)) {
      lock.release();
      lock.state_ = State::unsupported;
      lock.detail_ = std::strerror(error);
      return lock;
    }
    if (error != EWOULDBLOCK)
      throw RuntimeError("cannot lock '" + path + "': " + std::strerror(error));
    lock.detail_ = read_holder(lock.fd_);
    if (std::chrono::steady_clock::now() >= deadline) {
      lock.release();
      lock.state_ = State::busy;
      return lock;
    }
    if (!announced && on_wait) on_wait(lock.detail_);
    announced = true;
    std::this_thread::sleep_for(kRetryEvery);
  }
  lock.state_ = State::held;
  lock.detail_.clear();
  // Written in place and then cut to length, so a reader sees an old holder or this one.
  const std::string text = host + " " + std::to_string(::getpid()) + "\n";
  if (::pwrite(lock.fd_, text.data(), text.size(), 0) != ssize_t(text.size()) ||
      ::ftruncate(lock.fd_, off_t(text.size())) != 0)
    throw RuntimeError("cannot write the lock file '" + path + "': " + std::strerror(errno));
  return lock;
}

FolderLock FolderLock::share() const {
  FolderLock copy;
  if (state_ != State::held) return copy;
  copy.fd_ = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (copy.fd_ < 0)
    throw RuntimeError(std::string("cannot share the checkpoint folder's lock: ") +
                       std::strerror(errno));
  copy.state_ = State::held;
  return copy;
}

FolderLock::FolderLock(FolderLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      state_(std::exchange(other.state_, State::none)),
      detail_(std::move(other.detail_)) {}

FolderLock& FolderLock::operator=(FolderLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = std::exchange(other.fd_, -1);
    state_ = std::exchange(other.state_, State::none);
    detail_ = std::move(other.detail_);
  }
  return *this;
}

FolderLock::~FolderLock() {
  release();
}

void FolderLock::release() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace tp
