// The trace file (trace/trace_file.h): what each call writes, read back with HDF5 itself, on one
// rank over MPI (MPI_COMM_SELF) and without MPI (the drill's supervisor).
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/unit/one_rank.h"
#include "trace/trace_file.h"

namespace {

struct Read {
  std::vector<hsize_t> dims;
  std::vector<double> values;
};

Read read_doubles(const std::string& file, const std::string& path) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t set = H5Dopen2(f, path.c_str(), H5P_DEFAULT);
  const hid_t space = H5Dget_space(set);
  Read out;
  out.dims.resize(size_t(H5Sget_simple_extent_ndims(space)));
  H5Sget_simple_extent_dims(space, out.dims.data(), nullptr);
  out.values.resize(size_t(H5Sget_simple_extent_npoints(space)));
  if (!out.values.empty())
    H5Dread(set, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.values.data());
  H5Sclose(space);
  H5Dclose(set);
  H5Fclose(f);
  return out;
}

std::string read_string_at(const std::string& file, const std::string& path, size_t index) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t set = H5Dopen2(f, path.c_str(), H5P_DEFAULT);
  const hid_t type = H5Dget_type(set);
  const size_t width = H5Tget_size(type);
  const hid_t space = H5Dget_space(set);
  std::vector<char> bytes(size_t(H5Sget_simple_extent_npoints(space)) * width);
  H5Dread(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data());
  H5Sclose(space);
  H5Tclose(type);
  H5Dclose(set);
  H5Fclose(f);
  const char* at = bytes.data() + index * width;
  return std::string(at, strnlen(at, width));
}

TEST(TracePath, BesideTheReportUnlessNamedOrNone) {
  EXPECT_EQ(tp::trace_path_for("", "out/run.json"), "out/run.trace.h5");
  EXPECT_EQ(tp::trace_path_for("", "run"), "run.trace.h5");
  EXPECT_EQ(tp::trace_path_for("", "a.json.bak"), "a.json.bak.trace.h5");
  EXPECT_EQ(tp::trace_path_for("t.h5", "run.json"), "t.h5");
  EXPECT_EQ(tp::trace_path_for("none", "run.json"), "");
}

TEST(TraceFile, EachRankWritesItsRowsAndShorterRowsArePaddedWithNaN) {
  const tp::World world = tp::test::one_rank_world();
  const std::string path = tp::test::fresh_dir("trace_rows") + "/run.trace.h5";
  {
    tp::TraceFile file(path, world.comm);
    file.attribute("schema", "trainproof.trace/1");
    file.attribute("world_size", int64_t(1));
    file.rank_rows("train/step", {3}, {0.5, 0.25, 0.125});
    file.rank_rows("train/bucket_start", {2, 2}, {1, 2, 3, 4});
    file.rank_strings("ranks/host", 64, "node-7");
    file.root_values("train/step_number", {3}, std::vector<int64_t>{4, 5, 6});
    file.root_strings("sweep/op", 16, {"allreduce", "a-name-longer-than-sixteen"});
    file.close();
  }
  const Read step = read_doubles(path, "train/step");
  EXPECT_EQ(step.dims, (std::vector<hsize_t>{1, 3})) << "[ranks, steps]";
  EXPECT_EQ(step.values, (std::vector<double>{0.5, 0.25, 0.125}));
  const Read buckets = read_doubles(path, "train/bucket_start");
  EXPECT_EQ(buckets.dims, (std::vector<hsize_t>{1, 2, 2}));
  EXPECT_EQ(buckets.values, (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(read_doubles(path, "train/step_number").values, (std::vector<double>{4, 5, 6}));
  EXPECT_EQ(read_string_at(path, "ranks/host", 0), "node-7");
  EXPECT_EQ(read_string_at(path, "sweep/op", 1), "a-name-longer-th") << "cut at its width";
}

TEST(TraceFile, WithoutMpiOneProcessWritesEverything) {
  const std::string path = tp::test::fresh_dir("trace_serial") + "/drill.trace.h5";
  {
    tp::TraceFile file(path, MPI_COMM_NULL);
    file.root_values("drill/time_unix", {2}, std::vector<double>{10.0, 12.5});
    file.root_values("drill/none", {0}, std::vector<double>{});
    file.close();
  }
  EXPECT_EQ(read_doubles(path, "drill/time_unix").values, (std::vector<double>{10.0, 12.5}));
  EXPECT_TRUE(read_doubles(path, "drill/none").values.empty()) << "an empty dataset is kept";
}

TEST(TraceFile, AFolderThatDoesNotExistIsAnErrorNamingThePath) {
  try {
    tp::TraceFile file("/nonexistent-folder/run.trace.h5", MPI_COMM_NULL);
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-folder/run.trace.h5"), std::string::npos);
  }
}

}  // namespace
