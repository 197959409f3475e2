#pragma once
// Positioned I/O of a region of memory that hashes the bytes on the way, piece by piece, so each
// piece is hashed while it is still in cache: one pass over the bytes, no buffer of its own.
#include <cstdint>
#include <string>

#include "common/digest.h"

namespace tp {

// Writes `bytes` from `data` at `offset` of `fd` and adds them to `digest`, in file order.
// RuntimeError names `path` and the errno text (a full disk reads "No space left on device").
void write_hashed(int fd, const std::string& path, uint64_t offset, const void* data,
                  uint64_t bytes, DigestBuilder& digest);

// Reads `bytes` at `offset` of `fd` into `data` and adds them to `digest`. A file that ends
// before `offset + bytes` is RuntimeError naming `path`, as is an I/O error.
void read_hashed(int fd, const std::string& path, uint64_t offset, void* data, uint64_t bytes,
                 DigestBuilder& digest);

}  // namespace tp
