#pragma once
// The checkpoint store on one rank (MPI_COMM_SELF): a fixture with a folder per test, states whose
// values say which step wrote them, and the damage helpers the restore tests share.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "checkpoint/store.h"
#include "tests/unit/one_rank.h"

namespace tp::test {

namespace fs = std::filesystem;
using nlohmann::json;

inline constexpr size_t kElements = 300;
inline constexpr const char* kHash = "scenario-hash-a";

// A state whose every value says which step wrote it, so a restore of the wrong step shows.
inline tp::TrainingState state_at(int64_t step, bool adam = false) {
  tp::TrainingState s;
  s.step = step;
  for (size_t i = 0; i < kElements; ++i) {
    s.params.push_back(float(step) * 1000.0f + float(i));
    s.moment1.push_back(-float(step) - float(i) * 0.5f);
    if (adam) s.moment2.push_back(float(i) * 0.25f + float(step));
  }
  return s;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

inline void flip_byte(const std::string& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(std::streamoff(offset));
  const char byte = char(f.get() ^ 0x01);
  f.seekp(std::streamoff(offset));
  f.put(byte);
}

// The folder names in `dir`, sorted: what a crash or a retention pass left behind.
inline std::set<std::string> listing(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename());
  return names;
}

class CheckpointStore : public ::testing::Test {
 protected:
  void SetUp() override {
    world = tp::test::one_rank_world();
    dir = tp::test::fresh_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    options.dir = dir;
  }
  void TearDown() override { fs::remove_all(dir); }

  tp::CheckpointStore store(const std::string& hash = kHash) {
    return tp::CheckpointStore(options, world, hash, clock);
  }
  std::string folder(int64_t step) const {
    return dir + "/" + tp::CheckpointStore::folder_name(step);
  }
  std::string manifest(int64_t step) const { return folder(step) + "/MANIFEST.json"; }
  std::string data_file(int64_t step) const {
    return folder(step) + "/" +
           (options.layout == tp::CheckpointLayout::shared_file ? tp::kSharedCheckpointFile
                                                                : tp::rank_checkpoint_file(0));
  }
  void save_steps(std::initializer_list<int64_t> steps, bool adam = false) {
    auto s = store();
    for (int64_t step : steps) s.save(state_at(step, adam));
  }
  void edit_manifest(int64_t step, const std::function<void(json&)>& change) {
    json m = json::parse(read_text(manifest(step)));
    change(m);
    write_text(manifest(step), m.dump(2));
  }
  // Saves 4 and 8, damages 8, restores: must land on exactly 4 and set 8 aside naming `why`.
  std::string restore_after_damaging_8(const std::function<void()>& damage) {
    save_steps({4, 8});
    damage();
    tp::TrainingState restored;
    const auto result = store().restore(restored);
    EXPECT_TRUE(result.has_value());
    if (!result) return "";
    EXPECT_EQ(result->step, 4) << "must fall back to exactly the previous checkpoint";
    EXPECT_EQ(result->folder, folder(4));
    EXPECT_EQ(restored.params, state_at(4).params);
    EXPECT_EQ(restored.moment1, state_at(4).moment1);
    EXPECT_FALSE(fs::exists(folder(8)));
    EXPECT_TRUE(fs::is_directory(folder(8) + ".corrupt"));
    EXPECT_EQ(tp::CheckpointStore::committed_in(dir).front().first, 4);
    EXPECT_EQ(result->rejected.size(), 1u);
    if (result->rejected.size() != 1) return "";
    EXPECT_THAT(result->rejected[0], ::testing::StartsWith(folder(8) + ": "));
    return result->rejected[0];
  }

  tp::World world;
  tp::AlignedClock clock;
  tp::CheckpointOptions options;
  std::string dir;
};

}  // namespace tp::test
