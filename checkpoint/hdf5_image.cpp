#include "checkpoint/hdf5_image.h"

#include <hdf5.h>
#include <hdf5_hl.h>

#include <cstring>

#include "common/errors.h"
#include "common/hdf5_lock.h"
#include "common/hdf5_util.h"

namespace tp {
namespace {

using h5::check;
using h5::Handle;
using h5::read_int_attribute;
using h5::read_string_attribute;

// `image` is the file the handle was opened from. A contiguous dataset of native floats is copied
// straight out of it: HDF5's own read path moves the bytes through its sieve buffer and costs
// several times a memcpy on a large state.
void read_floats(hid_t file, const char* name, std::vector<float>& values, const std::string& what,
                 const unsigned char* image, size_t image_size) {
  Handle set{H5Dopen2(file, name, H5P_DEFAULT), H5Dclose};
  check(set.id >= 0, what + ": no dataset " + name);
  Handle space{H5Dget_space(set.id), H5Sclose};
  const hssize_t n = H5Sget_simple_extent_npoints(space.id);
  check(n >= 0, what + ": bad dataset " + name);
  values.resize(size_t(n));  // no allocation when the caller passes buffers of the model's size
  Handle type{H5Dget_type(set.id), H5Tclose};
  Handle create{H5Dget_create_plist(set.id), H5Pclose};
  const haddr_t offset = H5Dget_offset(set.id);
  const size_t bytes = size_t(n) * sizeof(float);
  if (n > 0 && H5Tequal(type.id, H5T_NATIVE_FLOAT) > 0 &&
      H5Pget_layout(create.id) == H5D_CONTIGUOUS && offset != HADDR_UNDEF && offset <= image_size &&
      bytes <= image_size - offset) {
    std::memcpy(values.data(), image + offset, bytes);
    return;
  }
  if (n > 0)
    check(H5Dread(set.id, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0,
          what + ": cannot read dataset " + name);
}

}  // namespace

void decode_checkpoint_image(const unsigned char* image, size_t size, const std::string& what,
                             TrainingState& state, CheckpointMeta& meta) {
  std::lock_guard<std::mutex> guard(hdf5_lock());
  // The library's own error stack would print to stderr; the caller reports the failure.
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  // Read-only, without a copy: HDF5 reads straight from the caller's verified buffer, which
  // outlives the file handle and stays the caller's to free.
  Handle file{H5LTopen_file_image(const_cast<unsigned char*>(image), size,
                                  H5LT_FILE_IMAGE_DONT_COPY | H5LT_FILE_IMAGE_DONT_RELEASE),
              H5Fclose};
  check(file.id >= 0, what + ": not an HDF5 checkpoint image");
  read_floats(file.id, "params", state.params, what, image, size);
  read_floats(file.id, "moment1", state.moment1, what, image, size);
  read_floats(file.id, "moment2", state.moment2, what, image, size);
  state.step = read_int_attribute(file.id, "step", what);
  meta.step = state.step;
  meta.world_size = int(read_int_attribute(file.id, "world_size", what));
  meta.rank = int(read_int_attribute(file.id, "rank", what));
  meta.scenario_hash = read_string_attribute(file.id, "scenario_hash", what);
  meta.layout = read_string_attribute(file.id, "layout", what);
  if (H5Aexists(file.id, "slice_begin") > 0) {
    meta.slice_begin = uint64_t(read_int_attribute(file.id, "slice_begin", what));
    meta.slice_end = uint64_t(read_int_attribute(file.id, "slice_end", what));
    meta.total_elements = uint64_t(read_int_attribute(file.id, "total_elements", what));
  } else {
    // Written before slices existed: always a whole replica.
    meta.slice_begin = 0;
    meta.slice_end = meta.total_elements = state.params.size();
  }
  if (meta.slice_end < meta.slice_begin || meta.slice_end - meta.slice_begin != state.params.size())
    throw RuntimeError(what + ": slice attributes do not match the params dataset");
}

}  // namespace tp
