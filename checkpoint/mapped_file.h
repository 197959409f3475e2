#pragma once
// Reading checkpoint files for a restore: mapped, hashed, and (checkpoint.cold_read) from storage
// rather than the page cache.
#include <cstddef>
#include <string>

namespace tp {

// Asks the kernel to drop the file's cached pages, so the read that follows measures storage
// rather than memory. The pages are clean (the file was fsynced), so nothing is lost.
void drop_page_cache(const std::string& path);

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

  // False, with `why`, when the file cannot be opened or mapped.
  bool map_and_hash(const std::string& path, std::string& why);
  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& checksum() const { return checksum_; }

 private:
  unsigned char* data_ = nullptr;
  size_t size_ = 0;
  std::string checksum_;
};

}  // namespace tp
