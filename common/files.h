#pragma once
// Durable, whole-file writes shared by checkpoints, datasets, reports and drill records.
#include <fcntl.h>
#include <sys/types.h>

#include <cstddef>
#include <string>

namespace tp {

// Writes all `size` bytes to `fd`, retrying short and interrupted writes; RuntimeError names
// `path` on failure.
void write_all(int fd, const void* data, size_t size, const std::string& path);

// fsync of a file (flags O_RDONLY) or a folder (O_RDONLY | O_DIRECTORY).
void fsync_path(const std::string& path, int flags = O_RDONLY);

// Replaces `path` with `text` so that a reader sees the old file or the new one, never a part:
// written to path + temp_suffix, fsynced, then renamed over it. RuntimeError on failure.
// Writers racing on one path give each its own suffix.
void write_file_atomically(const std::string& path, const std::string& text,
                           const std::string& temp_suffix = ".tmp");

// What a file that is not a regular file is ("a FIFO", "a folder", ...), for the message that
// refuses it.
const char* file_kind(mode_t mode);

// Why `path` cannot be read or written as a regular file, found without opening it (a FIFO would
// block the open): "" when it is absent or a regular file (links followed), else for example
// "is a folder, not a regular file".
std::string not_a_regular_file(const std::string& path);

// Before a run starts, so that its output can be written when it ends: `path` must be a new or
// regular file in an existing, writable folder, and its temporary name (path + ".tmp") free for a
// file. UsageError naming `option` and the path otherwise. Writes nothing.
void check_output_file(const std::string& option, const std::string& path);

}  // namespace tp
