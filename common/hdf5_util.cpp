#include "common/hdf5_util.h"

#include "common/errors.h"

namespace tp::h5 {

void check(bool ok, const std::string& what) {
  if (!ok) throw RuntimeError("HDF5: " + what);
}

void write_attribute(hid_t file, const char* name, int64_t value) {
  Handle space{H5Screate(H5S_SCALAR), H5Sclose};
  Handle attr{H5Acreate2(file, name, H5T_STD_I64LE, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose};
  check(attr.id >= 0 && H5Awrite(attr.id, H5T_NATIVE_INT64, &value) >= 0,
        std::string("cannot write attribute ") + name);
}

void write_attribute(hid_t file, const char* name, const std::string& value) {
  Handle type{H5Tcopy(H5T_C_S1), H5Tclose};
  H5Tset_size(type.id, value.size() + 1);
  Handle space{H5Screate(H5S_SCALAR), H5Sclose};
  Handle attr{H5Acreate2(file, name, type.id, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose};
  check(attr.id >= 0 && H5Awrite(attr.id, type.id, value.c_str()) >= 0,
        std::string("cannot write attribute ") + name);
}

int64_t read_int_attribute(hid_t file, const char* name, const std::string& what) {
  int64_t value = 0;
  Handle attr{H5Aopen(file, name, H5P_DEFAULT), H5Aclose};
  check(attr.id >= 0 && H5Aread(attr.id, H5T_NATIVE_INT64, &value) >= 0,
        what + ": no attribute " + name);
  return value;
}

std::string read_string_attribute(hid_t file, const char* name, const std::string& what) {
  Handle attr{H5Aopen(file, name, H5P_DEFAULT), H5Aclose};
  check(attr.id >= 0, what + ": no attribute " + name);
  Handle type{H5Aget_type(attr.id), H5Tclose};
  check(H5Tget_class(type.id) == H5T_STRING && !H5Tis_variable_str(type.id),
        what + ": attribute " + std::string(name) + " is not a fixed-length string");
  std::string value(H5Tget_size(type.id), '\0');
  check(H5Aread(attr.id, type.id, value.data()) >= 0, what + ": cannot read attribute " + name);
  value.resize(value.find('\0') == std::string::npos ? value.size() : value.find('\0'));
  return value;
}

void select_slab(hid_t file_space, hid_t memory_space, hsize_t begin, hsize_t count) {
  if (count == 0) {
    H5Sselect_none(file_space);
    H5Sselect_none(memory_space);
    return;
  }
  const hsize_t start[1] = {begin}, size[1] = {count};
  H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, nullptr, size, nullptr);
}

}  // namespace tp::h5
