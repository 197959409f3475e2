#pragma once
// Space on the checkpoint folder's filesystem: files written durably with their blocks reserved
// first, so a full disk fails before any data is written (naming the file) rather than midway
// through a write that other ranks take part in; the free space the preflight compares with
// what a run keeps.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "mpi/clock_sync.h"

namespace tp {

// Allocates the blocks of [0, bytes) of the open file `fd` without changing its size
// (fallocate with FALLOC_FL_KEEP_SIZE). A filesystem without fallocate is left to fail at the
// write, if it does. RuntimeError naming `path` and the errno text otherwise.
void reserve_file_space(int fd, uint64_t bytes, const std::string& path);

// Creates `path` with `size` bytes: space reserved, one write, one fsync; returns the fsync
// seconds. `midway`, when set, runs once half of the bytes are written (where a ckpt-write fault
// strikes). RuntimeError names the file and the errno text.
double write_durably(const std::string& path, const void* data, size_t size,
                     const AlignedClock& clock, const std::function<void()>& midway = {});

// Bytes an unprivileged writer may still use on the filesystem of `path` (statvfs f_bavail);
// RuntimeError naming `path` when it cannot be asked.
uint64_t free_bytes(const std::string& path);

// The sizes of the regular files under `folder`, added up (0 for a folder that is not there).
uint64_t bytes_under(const std::string& folder);

}  // namespace tp
