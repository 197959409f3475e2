#include "checkpoint/hdf5_image.h"

#include <hdf5.h>
#include <hdf5_hl.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "common/digest.h"
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

// The attributes, checked against the params dataset already read into `state`.
void read_meta(hid_t file, const std::string& what, TrainingState& state, CheckpointMeta& meta) {
  state.step = read_int_attribute(file, "step", what);
  meta.step = state.step;
  meta.world_size = int(read_int_attribute(file, "world_size", what));
  meta.rank = int(read_int_attribute(file, "rank", what));
  meta.scenario_hash = read_string_attribute(file, "scenario_hash", what);
  meta.layout = read_string_attribute(file, "layout", what);
  if (H5Aexists(file, "slice_begin") > 0) {
    meta.slice_begin = uint64_t(read_int_attribute(file, "slice_begin", what));
    meta.slice_end = uint64_t(read_int_attribute(file, "slice_end", what));
    meta.total_elements = uint64_t(read_int_attribute(file, "total_elements", what));
  } else {
    // Written before slices existed: always a whole replica.
    meta.slice_begin = 0;
    meta.slice_end = meta.total_elements = state.params.size();
  }
  if (meta.slice_end < meta.slice_begin || meta.slice_end - meta.slice_begin != state.params.size())
    throw RuntimeError(what + ": slice attributes do not match the params dataset");
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
  read_meta(file.id, what, state, meta);
}

namespace {

// Where a dataset's bytes lie in the image, and the buffer they decode into.
struct PlacedDataset {
  std::vector<float>* values;
  uint64_t offset;
  uint64_t bytes;
};

// HDF5 reads the metadata only: where each dataset lies, and the attributes. False (with
// `problem` set when the image does not decode) when a dataset is not contiguous native floats,
// which only HDF5's own read path can decode.
bool place_datasets(const unsigned char* image, size_t size, const std::string& what,
                    TrainingState& state, CheckpointMeta& meta, std::vector<PlacedDataset>& placed,
                    std::string& problem) {
  std::lock_guard<std::mutex> guard(hdf5_lock());
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  try {
    Handle file{H5LTopen_file_image(const_cast<unsigned char*>(image), size,
                                    H5LT_FILE_IMAGE_DONT_COPY | H5LT_FILE_IMAGE_DONT_RELEASE),
                H5Fclose};
    check(file.id >= 0, what + ": not an HDF5 checkpoint image");
    const std::pair<const char*, std::vector<float>*> sets[] = {
        {"params", &state.params}, {"moment1", &state.moment1}, {"moment2", &state.moment2}};
    for (const auto& [name, values] : sets) {
      Handle set{H5Dopen2(file.id, name, H5P_DEFAULT), H5Dclose};
      check(set.id >= 0, what + ": no dataset " + name);
      Handle space{H5Dget_space(set.id), H5Sclose};
      const hssize_t n = H5Sget_simple_extent_npoints(space.id);
      check(n >= 0, what + ": bad dataset " + name);
      // Read before the checksum is known: a damaged size must not allocate beyond the file.
      check(uint64_t(n) <= size / sizeof(float),
            what + ": dataset " + name + " is larger than the file");
      values->resize(size_t(n));  // no allocation into buffers of the model's size
      if (n == 0) continue;
      Handle type{H5Dget_type(set.id), H5Tclose};
      Handle create{H5Dget_create_plist(set.id), H5Pclose};
      const haddr_t offset = H5Dget_offset(set.id);
      const uint64_t bytes = uint64_t(n) * sizeof(float);
      if (H5Tequal(type.id, H5T_NATIVE_FLOAT) <= 0 || H5Pget_layout(create.id) != H5D_CONTIGUOUS ||
          offset == HADDR_UNDEF || offset > size || bytes > size - offset)
        return false;
      placed.push_back({values, uint64_t(offset), bytes});
    }
    read_meta(file.id, what, state, meta);
  } catch (const RuntimeError& e) {
    problem = e.what();
  }
  return true;
}

}  // namespace

std::string verify_and_decode_checkpoint_image(const unsigned char* image, size_t size,
                                               const std::string& expected_checksum,
                                               const std::string& what, TrainingState& state,
                                               CheckpointMeta& meta) {
  std::vector<PlacedDataset> placed;
  std::string problem;
  const bool placed_all = place_datasets(image, size, what, state, meta, placed, problem);
  if (!problem.empty()) placed.clear();
  std::sort(placed.begin(), placed.end(),
            [](const auto& a, const auto& b) { return a.offset < b.offset; });
  // One pass: each piece is hashed, and the datasets' bytes in it copied out while in cache.
  constexpr size_t kPiece = size_t(4) << 20;
  DigestBuilder digest;
  for (size_t begin = 0; begin < size; begin += kPiece) {
    const size_t end = std::min(size, begin + kPiece);
    digest.add(image + begin, end - begin);
    for (const PlacedDataset& set : placed) {
      const uint64_t from = std::max<uint64_t>(begin, set.offset);
      const uint64_t to = std::min<uint64_t>(end, set.offset + set.bytes);
      if (from < to)
        std::memcpy(reinterpret_cast<unsigned char*>(set.values->data()) + (from - set.offset),
                    image + from, to - from);
    }
  }
  if (digest.finish().hex() != expected_checksum) return what + " fails its xxh3-128 checksum";
  if (!problem.empty()) return problem;
  if (!placed_all) {
    // Verified: HDF5's own read path decodes what the one pass could not.
    try {
      decode_checkpoint_image(image, size, what, state, meta);
    } catch (const RuntimeError& e) {
      return e.what();
    }
  }
  return "";
}

}  // namespace tp
