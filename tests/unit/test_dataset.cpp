#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "common/errors.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "tests/unit/fifo_guard.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class Dataset : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    spec.dir = (fs::temp_directory_path() /
                ("trainproof-dataset-" + std::to_string(::getpid()) + "-" + GetParam()))
                   .string();
    fs::create_directories(spec.dir);
    spec.format = GetParam();
    spec.files = 3;
    spec.samples = 40;
    spec.sample_bytes = 3000;
    spec.spread = 0.5;
    spec.seed = 99;
  }
  void TearDown() override { fs::remove_all(spec.dir); }
  tp::DatasetSpec spec;
};

TEST_P(Dataset, ShardIndexRecordsWhatTheSamplesAre) {
  for (int f = 0; f < spec.files; ++f) tp::write_shard(spec, f);
  std::set<int64_t> lengths;
  for (int f = 0; f < spec.files; ++f) {
    const tp::ShardIndex index = tp::load_shard_index(spec, f);
    EXPECT_EQ(index.first_sample, tp::shard_first(spec, f));
    ASSERT_EQ(int64_t(index.lengths.size()), tp::shard_first(spec, f + 1) - index.first_sample);
    for (size_t i = 0; i < index.lengths.size(); ++i) {
      const int64_t sample = index.first_sample + int64_t(i);
      const int64_t length = tp::sample_length(spec, sample);
      EXPECT_EQ(int64_t(index.lengths[i]), length);
      EXPECT_GE(length, 1500);
      EXPECT_LE(length, 4500);
      std::vector<unsigned char> bytes(static_cast<size_t>(length));
      tp::fill_sample(spec, sample, bytes.data(), length);
      EXPECT_EQ(index.checksums[i], tp::sample_checksum(bytes.data(), bytes.size()));
      lengths.insert(length);
    }
  }
  EXPECT_GT(lengths.size(), 10u) << "data.spread must vary the lengths";
}

INSTANTIATE_TEST_SUITE_P(Formats, Dataset, ::testing::Values("raw", "hdf5"));

// Damaged datasets: every value the loader takes from index.json or a shard's index is checked
// before the first read, and a refusal is a UsageError (exit 2) naming the file, the field and
// the value, never a crash or a raw JSON exception.
class DamagedDataset : public Dataset {
 protected:
  void SetUp() override {
    Dataset::SetUp();
    std::vector<uint64_t> bytes;
    for (int f = 0; f < spec.files; ++f) bytes.push_back(tp::write_shard(spec, f));
    std::ofstream(index_path()) << tp::index_json(spec, bytes).dump(2);
  }
  std::string index_path() const { return spec.dir + "/index.json"; }
  std::string data_path(int shard) const { return spec.dir + "/" + tp::shard_name(spec, shard); }

  void set_index_field(const std::string& name, const nlohmann::json& value) {
    nlohmann::json index = nlohmann::json::parse(std::ifstream(index_path()));
    index[name] = value;
    std::ofstream(index_path()) << index.dump(2);
  }
  void write_index_text(const std::string& text) { std::ofstream(index_path()) << text; }

  // Where a shard's per-sample index lies: raw, its .idx file; hdf5, inside the shard.
  std::string index_file(int shard) const {
    return spec.format == "raw" ? spec.dir + "/" + tp::shard_index_name(shard) : data_path(shard);
  }
  // Replaces shard `shard`'s per-sample index with `index`'s values, however many there are.
  void rewrite_shard_index(int shard, const tp::ShardIndex& index) {
    if (spec.format == "raw") {
      std::vector<uint64_t> records;
      for (size_t i = 0; i < index.offsets.size(); ++i)
        records.insert(records.end(), {index.offsets[i], index.lengths[i], index.checksums[i]});
      std::ofstream(index_file(shard), std::ios::binary | std::ios::trunc)
          .write(reinterpret_cast<const char*>(records.data()),
                 std::streamsize(records.size() * sizeof(uint64_t)));
      return;
    }
    const hid_t file = H5Fopen(data_path(shard).c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    for (const auto& [name, values] :
         {std::pair{"offsets", &index.offsets}, std::pair{"lengths", &index.lengths},
          std::pair{"checksums", &index.checksums}}) {
      H5Ldelete(file, name, H5P_DEFAULT);
      const hsize_t dims[1] = {values->size()};
      const hid_t space = H5Screate_simple(1, dims, nullptr);
      const hid_t set =
          H5Dcreate2(file, name, H5T_STD_U64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      ASSERT_GE(set, 0);
      EXPECT_GE(H5Dwrite(set, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values->data()), 0);
      H5Dclose(set);
      H5Sclose(space);
    }
    H5Fclose(file);
  }

  // What `call` threw when it refused the dataset; fails the test when it did not refuse, or
  // refused with anything but a UsageError.
  std::string refusal(const std::function<void()>& call) {
    try {
      call();
    } catch (const tp::UsageError& e) {
      return e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a UsageError: " << e.what();
      return e.what();
    }
    ADD_FAILURE() << "the damaged dataset was accepted";
    return "";
  }
  std::string index_refusal() {
    return refusal([&] { tp::read_index(spec.dir); });
  }
  // The loader's checks before its first read: the index, then every shard against its files.
  std::string shard_refusal() {
    return refusal([&] {
      const tp::DatasetSpec found = tp::read_index(spec.dir);
      for (int f = 0; f < found.files; ++f) tp::load_shard_index(found, f);
    });
  }
  void expect_names_index(const std::string& message, const std::string& field,
                          const std::string& value) {
    EXPECT_THAT(message, HasSubstr(index_path()));
    EXPECT_THAT(message, HasSubstr("'" + field + "'"));
    EXPECT_THAT(message, HasSubstr(value));
    EXPECT_THAT(message, Not(HasSubstr("json.exception")));
  }
};

TEST_P(DamagedDataset, AnIntactDatasetPassesEveryCheck) {
  const tp::DatasetSpec found = tp::read_index(spec.dir);
  EXPECT_EQ(tp::index_difference(found, spec), "");
  for (int f = 0; f < found.files; ++f)
    EXPECT_EQ(tp::load_shard_index(found, f).lengths.size(),
              size_t(tp::shard_first(spec, f + 1) - tp::shard_first(spec, f)));
}

TEST_P(DamagedDataset, SamplesZeroOrNegativeIsRefused) {
  for (int samples : {0, -1}) {
    set_index_field("samples", samples);
    expect_names_index(index_refusal(), "samples", "got " + std::to_string(samples));
  }
}

TEST_P(DamagedDataset, FilesZeroOrNegativeIsRefused) {
  for (int files : {0, -1}) {
    set_index_field("files", files);
    expect_names_index(index_refusal(), "files", "got " + std::to_string(files));
  }
}

TEST_P(DamagedDataset, FewerSamplesThanFilesIsRefused) {
  set_index_field("samples", 2);
  expect_names_index(index_refusal(), "samples", "2");
}

TEST_P(DamagedDataset, OutOfRangeShapeValuesAreRefused) {
  set_index_field("sample_bytes", 0);
  expect_names_index(index_refusal(), "sample_bytes", "got 0");
  set_index_field("sample_bytes", 3000);
  set_index_field("samples", int64_t(1) << 50);
  expect_names_index(index_refusal(), "samples", std::to_string(int64_t(1) << 50));
  set_index_field("samples", 40);
  set_index_field("spread", 1.5);
  expect_names_index(index_refusal(), "spread", "1.5");
  set_index_field("spread", 0.5);
  set_index_field("seed", -3);
  expect_names_index(index_refusal(), "seed", "-3");
  set_index_field("seed", 99);
  set_index_field("data_format", "zarr");
  expect_names_index(index_refusal(), "data_format", "zarr");
}

TEST_P(DamagedDataset, WrongJsonTypesNameTheField) {
  const std::vector<std::pair<const char*, nlohmann::json>> cases{
      {"samples", "40"},  {"samples", nullptr},   {"files", 3.5},
      {"files", nullptr}, {"sample_bytes", true}, {"spread", "0.5"},
      {"seed", "99"},     {"data_format", 1},     {"format", nullptr}};
  for (const auto& [field, value] : cases) {
    SCOPED_TRACE(std::string(field) + " = " + value.dump());
    const nlohmann::json intact = nlohmann::json::parse(std::ifstream(index_path()));
    set_index_field(field, value);
    expect_names_index(index_refusal(), field, value.dump());
    std::ofstream(index_path()) << intact.dump(2);
  }
  nlohmann::json index = nlohmann::json::parse(std::ifstream(index_path()));
  index.erase("samples");
  std::ofstream(index_path()) << index.dump(2);
  expect_names_index(index_refusal(), "samples", "missing");
}

TEST_P(DamagedDataset, AnIndexThatIsNotAJsonObjectIsRefusedWithoutARawJsonError) {
  for (const char* text : {"[1, 2]", "{\"format\": ", "", "42"}) {
    SCOPED_TRACE(text);
    write_index_text(text);
    const std::string message = index_refusal();
    EXPECT_THAT(message, HasSubstr(index_path()));
    EXPECT_THAT(message, Not(HasSubstr("json.exception")));
  }
}

TEST_P(DamagedDataset, AZeroLengthSampleInAShardIndexIsRefused) {
  // Sample 3 of shard 1: its length set to 0 in the shard's own index.
  tp::ShardIndex index = tp::load_shard_index(spec, 1);
  index.lengths[3] = 0;
  rewrite_shard_index(1, index);
  const std::string message = shard_refusal();
  EXPECT_THAT(message, HasSubstr(index_file(1)));
  EXPECT_THAT(message, HasSubstr("sample " + std::to_string(tp::shard_first(spec, 1) + 3)));
  EXPECT_THAT(message, HasSubstr("length 0"));
}

TEST_P(DamagedDataset, ASampleLongerThanTheShapeAllowsIsRefused) {
  tp::ShardIndex index = tp::load_shard_index(spec, 0);
  index.lengths[0] = uint64_t(tp::max_sample_length(spec)) + 1;
  rewrite_shard_index(0, index);
  const std::string message = shard_refusal();
  EXPECT_THAT(message, HasSubstr(index_file(0)));
  EXPECT_THAT(message, HasSubstr("length " + std::to_string(index.lengths[0])));
}

TEST_P(DamagedDataset, ATruncatedShardIsCaughtBeforeTheFirstRead) {
  const std::string shard = data_path(2);
  fs::resize_file(shard, fs::file_size(shard) / 2);
  EXPECT_THAT(shard_refusal(), HasSubstr(shard));
}

TEST_P(DamagedDataset, AShardIndexForAnotherSampleCountIsRefused) {
  const int64_t samples = tp::shard_first(spec, 1);  // shard 0 holds samples 0 .. this - 1
  const tp::ShardIndex intact = tp::load_shard_index(spec, 0);
  for (int change : {-1, +1}) {
    SCOPED_TRACE(change);
    tp::ShardIndex index = intact;
    for (auto* values : {&index.offsets, &index.lengths, &index.checksums})
      values->resize(size_t(samples + change), values->front());
    rewrite_shard_index(0, index);
    const std::string message = shard_refusal();
    EXPECT_THAT(message, HasSubstr(index_file(0)));
    EXPECT_THAT(message, HasSubstr(std::to_string(samples) + " samples"));
  }
}

TEST_P(DamagedDataset, ASampleBeyondItsShardIsRefused) {
  tp::ShardIndex index = tp::load_shard_index(spec, 1);
  const uint64_t far = ~uint64_t(0) - 10;  // offset + length wraps around
  index.offsets[5] = far;
  rewrite_shard_index(1, index);
  const std::string message = shard_refusal();
  EXPECT_THAT(message, HasSubstr(data_path(1)));
  EXPECT_THAT(message, HasSubstr(std::to_string(far)));
}

// A FIFO where a file should be: nothing ever writes to it, so an open(2) without O_NONBLOCK,
// or a read, waits forever. Each is refused at once, naming the path.
TEST_P(DamagedDataset, AFifoInPlaceOfIndexJsonIsRefusedWithoutBlocking) {
  tp::test::make_fifo_at(index_path());
  const std::string dir = spec.dir;
  const tp::test::FifoOutcome outcome =
      tp::test::call_beside_fifo(index_path(), [dir] { tp::read_index(dir); });
  ASSERT_FALSE(outcome.blocked) << "read_index blocked on a FIFO";
  EXPECT_TRUE(outcome.usage_error) << outcome.message;
  EXPECT_THAT(outcome.message, HasSubstr(index_path()));
  EXPECT_THAT(outcome.message, HasSubstr("not a regular file"));
}

TEST_P(DamagedDataset, AFifoInPlaceOfAShardIsRefusedWithoutBlocking) {
  // raw: the shard's index (its data file is opened by the loader: test_loader.cpp); hdf5: the
  // shard itself.
  const std::string fifo =
      spec.format == "raw" ? spec.dir + "/" + tp::shard_index_name(1) : data_path(1);
  tp::test::make_fifo_at(fifo);
  const tp::DatasetSpec copy = spec;
  const tp::test::FifoOutcome outcome =
      tp::test::call_beside_fifo(fifo, [copy] { tp::load_shard_index(copy, 1); });
  ASSERT_FALSE(outcome.blocked) << "load_shard_index blocked on a FIFO";
  EXPECT_TRUE(outcome.usage_error) << outcome.message;
  EXPECT_THAT(outcome.message, HasSubstr(fifo));
  EXPECT_THAT(outcome.message, HasSubstr("not a regular file"));
}

TEST_P(DamagedDataset, AFolderInPlaceOfAShardIsRefused) {
  const std::string shard = data_path(0);
  fs::remove(shard);
  fs::create_directory(shard);
  const std::string message = shard_refusal();
  EXPECT_THAT(message, HasSubstr(shard));
  EXPECT_THAT(message, HasSubstr("not a regular file"));
}

INSTANTIATE_TEST_SUITE_P(Formats, DamagedDataset, ::testing::Values("raw", "hdf5"));

TEST(EpochOrder, EachEpochIsAPermutationAndEpochsDiffer) {
  tp::EpochOrder order(100, 7);
  std::vector<int64_t> first, second;
  for (int64_t p = 0; p < 100; ++p) first.push_back(order.sample_at(p));
  for (int64_t p = 100; p < 200; ++p) second.push_back(order.sample_at(p));
  EXPECT_NE(first, second);
  std::sort(first.begin(), first.end());
  std::sort(second.begin(), second.end());
  for (int64_t i = 0; i < 100; ++i) {
    EXPECT_EQ(first[size_t(i)], i);
    EXPECT_EQ(second[size_t(i)], i);
  }
  // Any process computes the same order, whatever it asked before.
  tp::EpochOrder fresh(100, 7);
  EXPECT_EQ(fresh.sample_at(150), order.sample_at(150));
}

}  // namespace
