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

// Asks the kernel to start writing `bytes` at `offset` of `fd` to storage now, without waiting
// for it. Called behind each written piece, it overlaps the device's work with the copying of the
// next piece, so the closing fsync finds little left to do (docs/checkpoint.md, "Writing").
// Best effort: a filesystem that cannot (or an error) leaves the work to fsync, which reports.
void start_writeback(int fd, uint64_t offset, uint64_t bytes);

// Reads `bytes` at `offset` of `fd` into `data` and adds them to `digest`. A file that ends
// before `offset + bytes` is RuntimeError naming `path`, as is an I/O error.
void read_hashed(int fd, const std::string& path, uint64_t offset, void* data, uint64_t bytes,
                 DigestBuilder& digest);

}  // namespace tp
