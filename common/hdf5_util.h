#pragma once
// Small pieces every HDF5 user in the project shares: a handle that closes itself, a checked
// call, scalar attributes on a file's root group, and a one-dimensional slab selection. Callers
// hold hdf5_lock() around any use.
#include <hdf5.h>

#include <cstdint>
#include <string>

namespace tp::h5 {

// Closes an HDF5 handle when it goes out of scope.
struct Handle {
  hid_t id;
  herr_t (*close)(hid_t);
  ~Handle() {
    if (id >= 0) close(id);
  }
};

// Throws RuntimeError("HDF5: " + what) unless `ok`.
void check(bool ok, const std::string& what);

void write_attribute(hid_t file, const char* name, int64_t value);
void write_attribute(hid_t file, const char* name, const std::string& value);
// `what` names the file in the error.
int64_t read_int_attribute(hid_t file, const char* name, const std::string& what);
std::string read_string_attribute(hid_t file, const char* name, const std::string& what);

// Selects [begin, begin + count) of a 1-D `file_space`, and all of `memory_space`; nothing in
// either when count is 0 (a rank with an empty slice still takes part in a collective call).
void select_slab(hid_t file_space, hid_t memory_space, hsize_t begin, hsize_t count);

}  // namespace tp::h5
