#include "common/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/errors.h"

namespace tp {

void write_all(int fd, const void* data, size_t size, const std::string& path) {
  const auto* bytes = static_cast<const char*>(data);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, bytes + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw RuntimeError("write '" + path + "': " + std::strerror(errno));
    done += size_t(n);
  }
}

void fsync_path(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) throw RuntimeError("cannot open '" + path + "' to fsync: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw RuntimeError("fsync '" + path + "': " + std::strerror(errno));
}

void write_file_atomically(const std::string& path, const std::string& text,
                           const std::string& temp_suffix) {
  const std::string temp = path + temp_suffix;
  // The temporary file is always a new one: whatever is left under its name (a crashed run's, or a
  // symlink planted to make this write land on another file) is removed, never opened or
  // followed; the rename then replaces `path` itself, a link there included.
  if (::unlink(temp.c_str()) != 0 && errno != ENOENT)
    throw RuntimeError("cannot remove '" + temp + "': " + std::strerror(errno));
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw RuntimeError("cannot create '" + temp + "': " + std::strerror(errno));
  try {
    write_all(fd, text.data(), text.size(), temp);
  } catch (...) {
    ::close(fd);
    throw;
  }
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw RuntimeError("fsync '" + temp + "': " + std::strerror(errno));
  if (std::rename(temp.c_str(), path.c_str()) != 0)
    throw RuntimeError("rename '" + temp + "' to '" + path + "': " + std::strerror(errno));
}

const char* file_kind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "of an unknown kind";
}

std::string not_a_regular_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return "";
  return std::string("is ") + file_kind(st.st_mode) + ", not a regular file";
}

void check_output_file(const std::string& option, const std::string& path) {
  const std::filesystem::path parent = std::filesystem::absolute(path).parent_path();
  if (!std::filesystem::is_directory(parent))
    throw UsageError(option + " " + path + ": directory '" + parent.string() + "' does not exist");
  if (::access(parent.c_str(), W_OK) != 0)
    throw UsageError(option + " " + path + ": directory '" + parent.string() + "' is not writable");
  for (const std::string& candidate : {path, path + ".tmp"})
    if (const std::string what = not_a_regular_file(candidate); !what.empty())
      throw UsageError(option + " " + path + ": '" + candidate + "' " + what +
                       "; the output is written there and renamed into place");
}

}  // namespace tp
