#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "data/dataset.h"
#include "data/loader.h"

namespace {

namespace fs = std::filesystem;

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
