#include "trace/trace_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <numeric>

#include "common/errors.h"
#include "common/hdf5_lock.h"
#include "common/hdf5_util.h"
#include "mpi/check.h"

namespace tp {
namespace {

using h5::Handle;

uint64_t product(const TraceDims& dims) {
  return std::accumulate(dims.begin(), dims.end(), uint64_t(1), std::multiplies<>());
}

std::vector<hsize_t> hdims(const TraceDims& dims) {
  return {dims.begin(), dims.end()};
}

hid_t string_type(size_t width) {
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, std::max<size_t>(width, 1));
  H5Tset_strpad(type, H5T_STR_NULLPAD);
  return type;
}

// Fixed-width, NUL-padded entries; a longer string is cut at the width.
std::vector<char> packed(const std::vector<std::string>& values, size_t width) {
  std::vector<char> bytes(values.size() * width, '\0');
  for (size_t i = 0; i < values.size(); ++i)
    std::memcpy(bytes.data() + i * width, values[i].data(), std::min(width, values[i].size()));
  return bytes;
}

// `row` (dims `from`) laid into a NaN-filled array of dims `to` (each at least as large).
std::vector<double> padded(const std::vector<double>& row, const TraceDims& from,
                           const TraceDims& to) {
  std::vector<double> out(product(to), std::numeric_limits<double>::quiet_NaN());
  const uint64_t n = product(from);
  for (uint64_t flat = 0; flat < n && flat < row.size(); ++flat) {
    uint64_t rest = flat, target = 0, stride = 1;
    for (size_t d = from.size(); d-- > 0;) {
      target += (rest % from[d]) * stride;
      rest /= from[d];
      stride *= to[d];
    }
    out[target] = row[flat];
  }
  return out;
}

}  // namespace

std::string trace_path_for(const std::string& option, const std::string& report_path) {
  if (option == "none") return "";
  if (!option.empty()) return option;
  const std::string suffix = ".json";
  if (report_path.size() > suffix.size() &&
      report_path.compare(report_path.size() - suffix.size(), suffix.size(), suffix) == 0)
    return report_path.substr(0, report_path.size() - suffix.size()) + ".trace.h5";
  return report_path + ".trace.h5";
}

TraceFile::TraceFile(const std::string& path, MPI_Comm comm) : path_(path), comm_(comm) {
  if (comm_ != MPI_COMM_NULL) {
    mpiCheck(MPI_Comm_rank(comm_, &rank_));
    mpiCheck(MPI_Comm_size(comm_, &size_));
  }
  std::lock_guard<std::mutex> hold(hdf5_lock());
  Handle fapl{H5Pcreate(H5P_FILE_ACCESS), H5Pclose};
  if (comm_ != MPI_COMM_NULL) H5Pset_fapl_mpio(fapl.id, comm_, MPI_INFO_NULL);
  file_ = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.id);
  if (file_ < 0) throw RuntimeError("cannot create the trace '" + path + "'");
}

TraceFile::~TraceFile() {
  try {
    close();
  } catch (...) {
  }
}

void TraceFile::close() {
  if (file_ < 0) return;
  std::lock_guard<std::mutex> hold(hdf5_lock());
  const hid_t file = file_;
  file_ = -1;
  if (H5Fclose(file) < 0) throw RuntimeError("cannot close the trace '" + path_ + "'");
}

// A variable-length UTF-8 string, which h5py reads back as str (a fixed-length one reads as
// bytes).
void TraceFile::attribute(const std::string& name, const std::string& value) {
  std::lock_guard<std::mutex> hold(hdf5_lock());
  Handle type{H5Tcopy(H5T_C_S1), H5Tclose};
  H5Tset_size(type.id, H5T_VARIABLE);
  H5Tset_cset(type.id, H5T_CSET_UTF8);
  Handle space{H5Screate(H5S_SCALAR), H5Sclose};
  Handle attribute{H5Acreate2(file_, name.c_str(), type.id, space.id, H5P_DEFAULT, H5P_DEFAULT),
                   H5Aclose};
  const char* text = value.c_str();
  if (attribute.id < 0 || H5Awrite(attribute.id, type.id, &text) < 0)
    throw RuntimeError("cannot write the attribute " + name + " to the trace '" + path_ + "'");
}

void TraceFile::attribute(const std::string& name, int64_t value) {
  std::lock_guard<std::mutex> hold(hdf5_lock());
  h5::write_attribute(file_, name.c_str(), value);
}

TraceDims TraceFile::agree_max(const TraceDims& mine) const {
  TraceDims all(mine.size());
  if (comm_ == MPI_COMM_NULL || mine.empty()) return mine;
  mpiCheck(MPI_Allreduce(mine.data(), all.data(), int(mine.size()), MPI_UINT64_T, MPI_MAX, comm_));
  return all;
}

TraceDims TraceFile::from_root(const TraceDims& mine) const {
  if (comm_ == MPI_COMM_NULL) return mine;
  uint64_t rank_count = mine.size();
  mpiCheck(MPI_Bcast(&rank_count, 1, MPI_UINT64_T, 0, comm_));
  TraceDims dims = mine;
  dims.resize(rank_count);
  mpiCheck(MPI_Bcast(dims.data(), int(rank_count), MPI_UINT64_T, 0, comm_));
  return dims;
}

void TraceFile::write(const std::string& path, hid_t type, const TraceDims& file_dims,
                      const TraceDims& offset, const TraceDims& count, const void* data) {
  std::lock_guard<std::mutex> hold(hdf5_lock());
  const auto fdims = hdims(file_dims);
  Handle file_space{H5Screate_simple(int(fdims.size()), fdims.data(), nullptr), H5Sclose};
  Handle links{H5Pcreate(H5P_LINK_CREATE), H5Pclose};
  H5Pset_create_intermediate_group(links.id, 1);
  Handle set{
      H5Dcreate2(file_, path.c_str(), type, file_space.id, links.id, H5P_DEFAULT, H5P_DEFAULT),
      H5Dclose};
  if (set.id < 0) throw RuntimeError("cannot create " + path + " in the trace '" + path_ + "'");
  const bool writes = product(count) > 0;
  auto mdims = hdims(count);
  for (hsize_t& d : mdims) d = std::max<hsize_t>(d, 1);
  Handle memory_space{H5Screate_simple(int(mdims.size()), mdims.data(), nullptr), H5Sclose};
  if (writes) {
    const auto start = hdims(offset), block = hdims(count);
    H5Sselect_hyperslab(file_space.id, H5S_SELECT_SET, start.data(), nullptr, block.data(),
                        nullptr);
  } else {
    H5Sselect_none(file_space.id);
    H5Sselect_none(memory_space.id);
  }
  Handle transfer{H5Pcreate(H5P_DATASET_XFER), H5Pclose};
  if (comm_ != MPI_COMM_NULL) H5Pset_dxpl_mpio(transfer.id, H5FD_MPIO_COLLECTIVE);
  const herr_t status =
      H5Dwrite(set.id, type, memory_space.id, file_space.id, transfer.id, writes ? data : nullptr);
  if (status < 0) throw RuntimeError("cannot write " + path + " to the trace '" + path_ + "'");
}

void TraceFile::rank_rows(const std::string& path, const TraceDims& dims,
                          const std::vector<double>& row) {
  const TraceDims agreed = agree_max(dims);
  const std::vector<double> values = padded(row, dims, agreed);
  TraceDims file_dims{uint64_t(size_)}, offset{uint64_t(rank_)}, count{1};
  for (uint64_t d : agreed) {
    file_dims.push_back(d);
    offset.push_back(0);
    count.push_back(d);
  }
  write(path, H5T_NATIVE_DOUBLE, file_dims, offset, count, values.data());
}

void TraceFile::rank_strings(const std::string& path, size_t width, const std::string& mine) {
  const std::vector<char> bytes = packed({mine}, width);
  Handle type{string_type(width), H5Tclose};
  write(path, type.id, {uint64_t(size_)}, {uint64_t(rank_)}, {1}, bytes.data());
}

void TraceFile::root_values(const std::string& path, const TraceDims& dims,
                            const std::vector<double>& values) {
  const TraceDims agreed = from_root(dims);
  const TraceDims count = rank_ == 0 ? agreed : TraceDims(agreed.size(), 0);
  write(path, H5T_NATIVE_DOUBLE, agreed, TraceDims(agreed.size(), 0), count, values.data());
}

void TraceFile::root_values(const std::string& path, const TraceDims& dims,
                            const std::vector<int64_t>& values) {
  const TraceDims agreed = from_root(dims);
  const TraceDims count = rank_ == 0 ? agreed : TraceDims(agreed.size(), 0);
  write(path, H5T_NATIVE_INT64, agreed, TraceDims(agreed.size(), 0), count, values.data());
}

void TraceFile::root_strings(const std::string& path, size_t width,
                             const std::vector<std::string>& values) {
  const TraceDims agreed = from_root({values.size()});
  const std::vector<char> bytes = packed(values, width);
  Handle type{string_type(width), H5Tclose};
  const TraceDims count = rank_ == 0 ? agreed : TraceDims{0};
  write(path, type.id, agreed, {0}, count, bytes.data());
}

}  // namespace tp
