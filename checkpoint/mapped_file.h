#pragma once
// Reading checkpoint files for a restore: opened only as regular files inside their step folder,
// mapped, hashed, and (checkpoint.cold_read) from storage rather than the page cache.
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace tp {

// A checkpoint file open for reading, and what fstat said of the open descriptor.
class ReadOnlyFile {
 public:
  ReadOnlyFile() = default;
  ReadOnlyFile(int fd, const struct stat& info) : fd_(fd), info_(info) {}
  ~ReadOnlyFile();
  ReadOnlyFile(ReadOnlyFile&& other) noexcept : fd_(other.fd_), info_(other.info_) {
    other.fd_ = -1;
  }
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(ReadOnlyFile&&) = delete;

  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  uint64_t size() const { return uint64_t(info_.st_size); }
  const struct stat& info() const { return info_; }

 private:
  int fd_ = -1;
  struct stat info_ {};
};

// A step folder opened for a restore. The folder is never reached through a symlink, and its
// files are opened by plain name relative to it, as regular files only: not through a symlink
// (which could lead out of the folder), and never a FIFO, device or socket, whose open or read
// could block the restore for ever. Each is damage, named by its path.
class CheckpointFolder {
 public:
  explicit CheckpointFolder(std::string path);
  ~CheckpointFolder();
  CheckpointFolder(const CheckpointFolder&) = delete;
  CheckpointFolder& operator=(const CheckpointFolder&) = delete;

  // "" when the folder is open, else what is wrong with it.
  const std::string& problem() const { return problem_; }
  const std::string& path() const { return path_; }
  std::string path_of(const std::string& name) const { return path_ + "/" + name; }
  // `name` (a plain name, no separator) opened for reading; not open, with `why`, when it cannot
  // be opened or is not a regular file.
  ReadOnlyFile open_file(const std::string& name, std::string& why) const;
  // True while `name` is still the file `file` was opened as: a reader that must reopen the file
  // by path (MPI-IO) checks afterwards that it read that file.
  bool still_names(const std::string& name, const ReadOnlyFile& file) const;

 private:
  std::string path_;
  int fd_ = -1;
  std::string problem_;
};

// Asks the kernel to drop the file's cached pages, so the read that follows measures storage
// rather than memory. The pages are clean (the file was fsynced), so nothing is lost.
void drop_page_cache(const ReadOnlyFile& file);

// A checkpoint file mapped read-only, with its xxh3-128. Mapping (rather than read() into a fresh
// buffer) saves a copy of every byte and the page faults of a buffer as large as the file; the
// checksum pass is what pulls the pages in, helped by sequential readahead. A file truncated by
// another process while mapped would raise SIGBUS: checkpoints are never modified in place.
class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // False, with `why` naming `path`, when the file cannot be mapped.
  bool map_and_hash(const ReadOnlyFile& file, const std::string& path, std::string& why);
  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& checksum() const { return checksum_; }

 private:
  unsigned char* data_ = nullptr;
  size_t size_ = 0;
  std::string checksum_;
};

}  // namespace tp
