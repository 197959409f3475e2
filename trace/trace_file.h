#pragma once
// The run's trace: one HDF5 file that every rank writes together, each its own rows, so that no
// rank holds another rank's samples and the filesystem sees one file per run. The layout it
// serves is in docs/report.md, "The trace".
#include <hdf5.h>
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tp {

using TraceDims = std::vector<uint64_t>;

class TraceFile {
 public:
  // Collective over `comm`: creates (or replaces) `path` with parallel HDF5. MPI_COMM_NULL opens
  // it for this process alone (the drill's supervisor, which runs outside MPI).
  TraceFile(const std::string& path, MPI_Comm comm);
  ~TraceFile();
  TraceFile(const TraceFile&) = delete;
  TraceFile& operator=(const TraceFile&) = delete;

  // Collective; every rank passes the same value. An attribute of the root group.
  void attribute(const std::string& name, const std::string& value);
  void attribute(const std::string& name, int64_t value);

  // Collective: the dataset `path` of [ranks] + row dims, this rank's row at its rank's index.
  // `row` holds `dims` (row-major); ranks may pass different dims, and the dataset takes the
  // largest of each, the rest NaN. Intermediate groups are created.
  void rank_rows(const std::string& path, const TraceDims& dims, const std::vector<double>& row);
  // Collective: a dataset of [ranks] fixed-width strings, this rank's at its index.
  void rank_strings(const std::string& path, size_t width, const std::string& mine);

  // Collective: a dataset whose dims and values rank 0 holds; the other ranks' are ignored.
  void root_values(const std::string& path, const TraceDims& dims,
                   const std::vector<double>& values);
  void root_values(const std::string& path, const TraceDims& dims,
                   const std::vector<int64_t>& values);
  void root_strings(const std::string& path, size_t width, const std::vector<std::string>& values);

  // Collective: closes the file (also done by the destructor, which swallows errors).
  void close();

  int rank() const { return rank_; }

 private:
  TraceDims agree_max(const TraceDims& mine) const;
  TraceDims from_root(const TraceDims& mine) const;
  void write(const std::string& path, hid_t type, const TraceDims& file_dims,
             const TraceDims& offset, const TraceDims& count, const void* data);

  std::string path_;
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  hid_t file_ = -1;
};

// Where the trace of a report goes: `option` itself, none for "none", or by default ("") the
// report's path with ".trace.h5" in place of ".json" (appended when it has no such ending).
std::string trace_path_for(const std::string& option, const std::string& report_path);

}  // namespace tp
