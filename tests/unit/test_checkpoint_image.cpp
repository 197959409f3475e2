#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "checkpoint/hdf5_image.h"
#include "checkpoint/rank_file.h"
#include "checkpoint/slices.h"
#include "common/errors.h"

namespace {

// A rank file as the store writes it, read back whole.
std::vector<unsigned char> encode(const tp::TrainingState& state, const tp::CheckpointMeta& meta) {
  const std::string path = std::filesystem::temp_directory_path() /
                           ("checkpoint-image-" + std::to_string(::getpid()) + ".h5");
  const tp::RankFileLayout layout =
      tp::lay_out_rank_file(path, tp::tensor_views(state, {0, state.params.size()}), meta);
  tp::write_rank_file_data(layout);
  std::ifstream in(path, std::ios::binary);
  std::vector<unsigned char> bytes{std::istreambuf_iterator<char>(in),
                                   std::istreambuf_iterator<char>()};
  std::filesystem::remove(path);
  return bytes;
}

tp::TrainingState sample_state() {
  tp::TrainingState s;
  s.step = 42;
  for (int i = 0; i < 1000; ++i) {
    s.params.push_back(float(i) * 0.5f);
    s.moment1.push_back(-float(i));
  }
  s.moment2 = {1.0f, 2.0f};
  return s;
}

TEST(CheckpointImage, RoundTripsStateAndMetadata) {
  const tp::CheckpointMeta meta{42, 4, 3, "abc123", "file-per-rank", 0, 1000, 1000};
  const auto image = encode(sample_state(), meta);
  ASSERT_GT(image.size(), 8000u);
  EXPECT_EQ(std::string(image.begin() + 1, image.begin() + 4), "HDF");  // an HDF5 superblock
  tp::TrainingState back;
  tp::CheckpointMeta back_meta;
  tp::decode_checkpoint_image(image.data(), image.size(), "test", back, back_meta);
  EXPECT_EQ(back.step, 42);
  EXPECT_EQ(back.params, sample_state().params);
  EXPECT_EQ(back.moment1, sample_state().moment1);
  EXPECT_EQ(back.moment2, sample_state().moment2);
  EXPECT_EQ(back_meta.world_size, 4);
  EXPECT_EQ(back_meta.rank, 3);
  EXPECT_EQ(back_meta.scenario_hash, "abc123");
  EXPECT_EQ(back_meta.layout, "file-per-rank");
}

TEST(CheckpointImage, SameStateGivesTheSameBytes) {
  const tp::CheckpointMeta meta{42, 1, 0, "h", "file-per-rank", 0, 1000, 1000};
  const auto first = encode(sample_state(), meta);
  // HDF5 stamps objects with their time to the second unless told not to: cross a second.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_EQ(first, encode(sample_state(), meta));
}

TEST(CheckpointImage, ASliceRecordsWhereItBelongs) {
  const tp::Slice slice = tp::rank_slice(1000, 1, 4);
  tp::TrainingState full = sample_state();
  full.moment2.assign(1000, 3.0f);
  const tp::CheckpointMeta meta{42,          4,         1,   "h", "file-per-rank+shard_optimizer",
                                slice.begin, slice.end, 1000};
  const auto image = encode(tp::cut(full, slice), meta);
  tp::TrainingState back;
  tp::CheckpointMeta back_meta;
  tp::decode_checkpoint_image(image.data(), image.size(), "test", back, back_meta);
  EXPECT_EQ(back_meta.slice_begin, 250u);
  EXPECT_EQ(back_meta.slice_end, 500u);
  EXPECT_EQ(back_meta.total_elements, 1000u);
  ASSERT_EQ(back.params.size(), 250u);
  EXPECT_EQ(back.params.front(), full.params[250]);
  EXPECT_EQ(back.moment2.size(), 250u);
}

TEST(CheckpointImage, GarbageIsAnErrorNamingTheFile) {
  std::vector<unsigned char> garbage(4096, 0x5a);
  tp::TrainingState state;
  tp::CheckpointMeta meta;
  try {
    tp::decode_checkpoint_image(garbage.data(), garbage.size(), "ckpt/step-00000008/rank-00001.h5",
                                state, meta);
    FAIL() << "garbage decoded";
  } catch (const tp::RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("rank-00001.h5"), std::string::npos);
  }
}

}  // namespace
