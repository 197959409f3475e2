// The checkpoint store on one rank (MPI_COMM_SELF): the commit protocol, verified restore with
// fallback past damage, and retention. The multi-rank cases (slices over ranks, agreement, async
// beside the step's collectives) stay in tests/integration under mpirun.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>

#include "checkpoint/store.h"
#include "common/errors.h"
#include "tests/unit/one_rank.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr size_t kElements = 300;
constexpr const char* kHash = "scenario-hash-a";

// A state whose every value says which step wrote it, so a restore of the wrong step shows.
tp::TrainingState state_at(int64_t step, bool adam = false) {
  tp::TrainingState s;
  s.step = step;
  for (size_t i = 0; i < kElements; ++i) {
    s.params.push_back(float(step) * 1000.0f + float(i));
    s.moment1.push_back(-float(step) - float(i) * 0.5f);
    if (adam) s.moment2.push_back(float(i) * 0.25f + float(step));
  }
  return s;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

void flip_byte(const std::string& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(std::streamoff(offset));
  const char byte = char(f.get() ^ 0x01);
  f.seekp(std::streamoff(offset));
  f.put(byte);
}

// The folder names in `dir`, sorted: what a crash or a retention pass left behind.
std::set<std::string> listing(const std::string& dir) {
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
    EXPECT_THAT(result->rejected[0], StartsWith(folder(8) + ": "));
    return result->rejected[0];
  }

  tp::World world;
  tp::AlignedClock clock;
  tp::CheckpointOptions options;
  std::string dir;
};

TEST_F(CheckpointStore, ACommittedCheckpointRestoresEveryValue) {
  for (const bool adam : {false, true}) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    auto s = store();
    const tp::CheckpointSave save = s.save(state_at(6, adam));
    EXPECT_EQ(save.step, 6);
    EXPECT_EQ(save.bytes, fs::file_size(data_file(6)));
    EXPECT_EQ(listing(dir), (std::set<std::string>{"step-00000006"})) << "no .partial left";
    EXPECT_EQ(listing(folder(6)), (std::set<std::string>{"MANIFEST.json", "rank-00000.h5"}));

    tp::TrainingState restored;
    const auto result = store().restore(restored);
    ASSERT_TRUE(result.has_value());
    EXPECT_EQ(result->step, 6);
    EXPECT_EQ(result->folder, folder(6));
    EXPECT_EQ(result->bytes, save.bytes);
    EXPECT_TRUE(result->rejected.empty());
    const tp::TrainingState expected = state_at(6, adam);
    EXPECT_EQ(restored.step, 6);
    EXPECT_EQ(restored.params, expected.params);
    EXPECT_EQ(restored.moment1, expected.moment1);
    EXPECT_EQ(restored.moment2, expected.moment2) << "adam " << adam;
  }
}

TEST_F(CheckpointStore, ManifestRecordsWhatWasWritten) {
  save_steps({4});
  const json m = json::parse(read_text(manifest(4)));
  EXPECT_EQ(m["format"], tp::kCheckpointFormat);
  EXPECT_EQ(m["step"], 4);
  EXPECT_EQ(m["world_size"], 1);
  EXPECT_EQ(m["scenario_hash"], kHash);
  EXPECT_EQ(m["layout"], "file-per-rank");
  EXPECT_EQ(m["shard_optimizer"], false);
  EXPECT_EQ(m["total_elements"], kElements);
  ASSERT_EQ(m["files"].size(), 1u);
  const json& file = m["files"][0];
  EXPECT_EQ(file["name"], "rank-00000.h5");
  EXPECT_EQ(file["rank"], 0);
  EXPECT_EQ(file["bytes"], fs::file_size(data_file(4)));
  EXPECT_EQ(file["elements"], json::array({0, kElements}));
  EXPECT_EQ(file["xxh3_128"].get<std::string>().size(), 32u);
}

TEST_F(CheckpointStore, ManifestExtraFieldsAreRecorded) {
  auto s = store();
  s.set_manifest_extra([](int64_t step) { return json{{"data_loader", {{"step", step}}}}; });
  s.save(state_at(4));
  EXPECT_EQ(json::parse(read_text(manifest(4)))["data_loader"]["step"], 4);
}

TEST_F(CheckpointStore, NoCheckpointRestoresNothing) {
  tp::TrainingState restored;
  EXPECT_FALSE(store().restore(restored).has_value());
  EXPECT_EQ(store().newest_committed(), 0);
}

TEST_F(CheckpointStore, ManifestThatDoesNotParseFallsBack) {
  const std::string why = restore_after_damaging_8([&] {
    const std::string text = read_text(manifest(8));
    write_text(manifest(8), text.substr(0, text.size() / 2));
  });
  EXPECT_THAT(why, HasSubstr("MANIFEST.json does not parse"));
}

TEST_F(CheckpointStore, EmptyManifestFallsBack) {
  EXPECT_THAT(restore_after_damaging_8([&] { write_text(manifest(8), ""); }),
              HasSubstr("MANIFEST.json does not parse"));
}

TEST_F(CheckpointStore, ManifestOfAnotherFormatFallsBack) {
  const std::string why =
      restore_after_damaging_8([&] { edit_manifest(8, [](json& m) { m["format"] = "other/9"; }); });
  EXPECT_THAT(why, HasSubstr("MANIFEST.json has an unknown format"));
}

TEST_F(CheckpointStore, ManifestWithoutTheRanksFileEntryFallsBack) {
  const std::string why = restore_after_damaging_8(
      [&] { edit_manifest(8, [](json& m) { m["files"] = json::array(); }); });
  EXPECT_THAT(why, HasSubstr("MANIFEST.json lists no file for rank 0"));
}

TEST_F(CheckpointStore, ManifestWithAWrongChecksumFallsBack) {
  const std::string why = restore_after_damaging_8(
      [&] { edit_manifest(8, [](json& m) { m["files"][0]["xxh3_128"] = std::string(32, '0'); }); });
  EXPECT_EQ(why, folder(8) + ": " + data_file(8) + " fails its xxh3-128 checksum");
}

TEST_F(CheckpointStore, ManifestWithAWrongSizeFallsBack) {
  uint64_t size = 0;
  const std::string why = restore_after_damaging_8([&] {
    size = fs::file_size(data_file(8));
    edit_manifest(8, [&](json& m) { m["files"][0]["bytes"] = size + 1; });
  });
  EXPECT_EQ(why, folder(8) + ": " + data_file(8) + " has " + std::to_string(size) +
                     " bytes; the manifest says " + std::to_string(size + 1));
}

TEST_F(CheckpointStore, ManifestNamingAFileThatIsNotThereFallsBack) {
  const std::string why = restore_after_damaging_8(
      [&] { edit_manifest(8, [](json& m) { m["files"][0]["name"] = "rank-00009.h5"; }); });
  EXPECT_THAT(why, HasSubstr(folder(8) + "/rank-00009.h5"));
}

TEST_F(CheckpointStore, ManifestWithAMistypedFieldFallsBack) {
  const std::string why = restore_after_damaging_8(
      [&] { edit_manifest(8, [](json& m) { m["total_elements"] = "many"; }); });
  EXPECT_THAT(why, HasSubstr("MANIFEST.json"));
}

TEST_F(CheckpointStore, FlippedByteInTheDataFileFallsBack) {
  const std::string why = restore_after_damaging_8([&] { flip_byte(data_file(8), 100); });
  EXPECT_EQ(why, folder(8) + ": " + data_file(8) + " fails its xxh3-128 checksum");
}

TEST_F(CheckpointStore, TruncatedDataFileFallsBack) {
  const std::string why = restore_after_damaging_8(
      [&] { fs::resize_file(data_file(8), fs::file_size(data_file(8)) - 16); });
  EXPECT_THAT(why, HasSubstr(data_file(8) + " has "));
  EXPECT_THAT(why, HasSubstr("bytes; the manifest says"));
}

TEST_F(CheckpointStore, MissingDataFileFallsBack) {
  const std::string why = restore_after_damaging_8([&] { fs::remove(data_file(8)); });
  EXPECT_THAT(why, HasSubstr(data_file(8)));
}

TEST_F(CheckpointStore, EveryCheckpointDamagedRestoresNothingAndSetsEachAside) {
  save_steps({4, 8});
  flip_byte(data_file(4), 100);
  write_text(manifest(8), "{");
  tp::TrainingState restored;
  const auto result = store().restore(restored);
  EXPECT_FALSE(result.has_value());
  EXPECT_EQ(listing(dir),
            (std::set<std::string>{"step-00000004.corrupt", "step-00000008.corrupt"}));
}

TEST_F(CheckpointStore, ManifestTotalThatTheFileDoesNotHoldFallsBack) {
  // The file verifies against its own checksum; the state's size must still be what the
  // manifest says, or a restore would import a state of another shape.
  const std::string why = restore_after_damaging_8(
      [&] { edit_manifest(8, [](json& m) { m["total_elements"] = kElements + 1; }); });
  EXPECT_EQ(why,
            folder(8) + ": " + data_file(8) + " holds elements [0, 300); rank 0 needs [0, 301)");
}

// A manifest that contradicts the run is not damage: it is the wrong run, and a fallback would
// silently restore an older state of another scenario. Exit 2, naming both values; nothing moves.
TEST_F(CheckpointStore, AnotherScenarioHashIsAUsageErrorNamingBoth) {
  save_steps({4});
  tp::TrainingState restored;
  try {
    store("scenario-hash-b").restore(restored);
    FAIL() << "restore accepted another scenario's checkpoint";
  } catch (const tp::UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "checkpoint " + folder(4) +
                  " has scenario hash scenario-hash-a; this run's is scenario-hash-b (a model, "
                  "seed, optimizer, batch or dtype option differs)");
  }
  EXPECT_TRUE(fs::exists(manifest(4)));
}

TEST_F(CheckpointStore, AnotherWorldSizeIsAUsageErrorNamingBoth) {
  save_steps({4});
  edit_manifest(4, [](json& m) { m["world_size"] = 2; });
  tp::TrainingState restored;
  try {
    store().restore(restored);
    FAIL() << "restore accepted a checkpoint of 2 ranks";
  } catch (const tp::UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("was written by 2 ranks; this run has 1"));
  }
  EXPECT_TRUE(fs::exists(manifest(4)));
}

TEST_F(CheckpointStore, AnotherLayoutIsAUsageErrorNamingBoth) {
  options.shard_optimizer = true;
  save_steps({4});
  options.shard_optimizer = false;
  tp::TrainingState restored;
  try {
    store().restore(restored);
    FAIL() << "restore accepted a checkpoint of another layout";
  } catch (const tp::UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("was written with layout file-per-rank+shard_optimizer; this "
                                    "run asks for file-per-rank"));
  }
}

TEST_F(CheckpointStore, OnlyExactlyNamedFoldersWithAManifestCount) {
  save_steps({4, 8});
  // A crash mid-write leaves .partial; a restore that rejected a folder leaves .corrupt; a
  // deletion cut short leaves .deleting; none of them, nor a folder without a manifest, counts.
  for (const char* name : {"step-00000012.partial", "step-00000013.corrupt",
                           "step-00000014.deleting", "step-15", "step-00000016x"})
    fs::copy(folder(8), dir + "/" + name);
  fs::copy(folder(8), folder(11));
  fs::remove(manifest(11));
  const auto committed = tp::CheckpointStore::committed_in(dir);
  ASSERT_EQ(committed.size(), 2u);
  EXPECT_EQ(committed[0], std::make_pair(int64_t(8), folder(8)));
  EXPECT_EQ(committed[1], std::make_pair(int64_t(4), folder(4)));
  EXPECT_EQ(store().newest_committed(), 8);

  tp::TrainingState restored;
  const auto result = store().restore(restored);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->step, 8);
  EXPECT_TRUE(result->rejected.empty());
  // What does not count is not touched either.
  EXPECT_TRUE(fs::exists(dir + "/step-00000012.partial/MANIFEST.json"));
  EXPECT_TRUE(fs::exists(folder(11)));
}

TEST_F(CheckpointStore, RetentionKeepsTheNewestN) {
  options.keep = 3;
  save_steps({2, 4, 6, 8, 10, 12});
  EXPECT_EQ(listing(dir),
            (std::set<std::string>{"step-00000008", "step-00000010", "step-00000012"}));
}

TEST_F(CheckpointStore, RetentionLeavesLaterStepsOfAnEarlierLongerRun) {
  save_steps({8, 10});
  save_steps({2, 4, 6});  // a fresh run over the folder
  EXPECT_EQ(listing(dir), (std::set<std::string>{"step-00000004", "step-00000006", "step-00000008",
                                                 "step-00000010"}));
}

TEST_F(CheckpointStore, SavingAStepThatExistsReplacesIt) {
  save_steps({4});
  auto s = store();
  tp::TrainingState other = state_at(4);
  other.params[0] = -1.0f;
  s.save(other);
  EXPECT_EQ(listing(dir), (std::set<std::string>{"step-00000004"}));
  tp::TrainingState restored;
  ASSERT_TRUE(store().restore(restored).has_value());
  EXPECT_EQ(restored.params, other.params);
}

// A save that dies after its manifest is written but before the rename (the "ckpt-commit" point)
// must cost nothing that was committed: retention runs only after the new folder is committed.
TEST_F(CheckpointStore, ACrashBeforeTheCommitKeepsEveryOlderCheckpoint) {
  save_steps({4, 6});
  auto s = store();
  std::set<std::string> at_commit;
  s.set_fault_hook([&](int64_t step, const char* point) {
    if (step == 8 && std::string(point) == "ckpt-commit") {
      at_commit = listing(dir);
      throw std::runtime_error("killed at ckpt-commit");
    }
  });
  EXPECT_THROW(s.save(state_at(8)), std::runtime_error);
  EXPECT_EQ(at_commit,
            (std::set<std::string>{"step-00000004", "step-00000006", "step-00000008.partial"}));
  EXPECT_EQ(listing(dir), at_commit) << "nothing committed may go before its successor is";
  EXPECT_TRUE(fs::exists(folder(8) + ".partial/MANIFEST.json"));
  tp::TrainingState restored;
  const auto result = store().restore(restored);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->step, 6);
  EXPECT_TRUE(result->rejected.empty());

  // The next save of that step replaces the stale .partial and commits.
  save_steps({8});
  EXPECT_EQ(listing(dir), (std::set<std::string>{"step-00000006", "step-00000008"}));
}

TEST_F(CheckpointStore, ACrashMidWriteLeavesOnlyAPartialFolder) {
  save_steps({4});
  auto s = store();
  std::vector<std::string> points;
  s.set_fault_hook([&](int64_t step, const char* point) {
    points.push_back(std::to_string(step) + " " + point);
    if (std::string(point) == "ckpt-write") throw std::runtime_error("killed at ckpt-write");
  });
  EXPECT_THROW(s.save(state_at(8)), std::runtime_error);
  EXPECT_EQ(points, (std::vector<std::string>{"8 ckpt-write"}));
  EXPECT_EQ(listing(dir), (std::set<std::string>{"step-00000004", "step-00000008.partial"}));
  EXPECT_FALSE(fs::exists(folder(8) + ".partial/MANIFEST.json"));
  EXPECT_EQ(store().newest_committed(), 4);
}

TEST_F(CheckpointStore, FaultPointsComeInProtocolOrder) {
  auto s = store();
  std::vector<std::string> points;
  s.set_fault_hook([&](int64_t step, const char* point) {
    // At the commit point the manifest is durable and the folder not yet renamed.
    points.push_back(std::to_string(step) + " " + point + " " +
                     (fs::exists(folder(step) + ".partial/MANIFEST.json") ? "manifest" : "-") +
                     (fs::exists(folder(step)) ? " committed" : ""));
  });
  s.save(state_at(4));
  EXPECT_EQ(points, (std::vector<std::string>{"4 ckpt-write -", "4 ckpt-commit manifest"}));
}

TEST_F(CheckpointStore, ColdReadRestoresTheSameState) {
  save_steps({4});
  options.cold_read = true;
  tp::TrainingState restored;
  ASSERT_TRUE(store().restore(restored).has_value());
  EXPECT_EQ(restored.params, state_at(4).params);
}

TEST_F(CheckpointStore, ShardedFilesOfOneRankHoldTheWholeState) {
  options.shard_optimizer = true;
  save_steps({4}, /*adam=*/true);
  EXPECT_EQ(json::parse(read_text(manifest(4)))["shard_optimizer"], true);
  tp::TrainingState restored;
  const auto result = store().restore(restored);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(restored.params, state_at(4, true).params);
  EXPECT_EQ(restored.moment2, state_at(4, true).moment2);
}

TEST_F(CheckpointStore, UnusableFolderIsAUsageErrorNamingTheHost) {
  options.dir = "/proc/trainproof-unit-checkpoints";
  try {
    store().preflight();
    FAIL() << "preflight accepted " << options.dir;
  } catch (const tp::UsageError& e) {
    EXPECT_THAT(e.what(), StartsWith("checkpoint.dir '/proc/trainproof-unit-checkpoints' is not "
                                     "usable on host unit-host: "));
  }
}

TEST_F(CheckpointStore, PreflightLeavesNoProbeBehind) {
  const tp::CheckpointFolderFacts facts = store().preflight();
  EXPECT_EQ(facts.path, dir);
  EXPECT_TRUE(listing(dir).empty());
}

TEST_F(CheckpointStore, AFolderThisRankDoesNotShareIsAUsageError) {
  options.test_unshared_rank = 0;
  try {
    store().preflight();
    FAIL() << "preflight accepted a folder rank 0's probe is not in";
  } catch (const tp::UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("on host unit-host is not the folder rank 0 sees"));
  }
}

class SharedFileCheckpoint : public CheckpointStore {
 protected:
  void SetUp() override {
    CheckpointStore::SetUp();
    options.layout = tp::CheckpointLayout::shared_file;
  }
};

TEST_F(SharedFileCheckpoint, RestoresEveryValue) {
  save_steps({4}, /*adam=*/true);
  EXPECT_EQ(listing(folder(4)), (std::set<std::string>{"MANIFEST.json", "state.h5"}));
  const json m = json::parse(read_text(manifest(4)));
  EXPECT_EQ(m["layout"], "shared-file");
  ASSERT_EQ(m["files"].size(), 1u);
  EXPECT_EQ(m["files"][0]["bytes"], fs::file_size(data_file(4)));
  ASSERT_EQ(m["files"][0]["slabs"].size(), 1u);
  EXPECT_EQ(m["files"][0]["slabs"][0]["elements"], json::array({0, kElements}));
  tp::TrainingState restored;
  const auto result = store().restore(restored);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->step, 4);
  const tp::TrainingState expected = state_at(4, true);
  EXPECT_EQ(restored.params, expected.params);
  EXPECT_EQ(restored.moment1, expected.moment1);
  EXPECT_EQ(restored.moment2, expected.moment2);
}

TEST_F(SharedFileCheckpoint, WrongSlabChecksumFallsBack) {
  const std::string why = restore_after_damaging_8([&] {
    edit_manifest(8, [](json& m) { m["files"][0]["slabs"][0]["xxh3_128"] = std::string(32, '0'); });
  });
  EXPECT_EQ(why, folder(8) + ": " + data_file(8) + ": the slab of rank 0 (elements [0, " +
                     std::to_string(kElements) + ")) fails its xxh3-128 checksum");
}

TEST_F(SharedFileCheckpoint, MissingSlabFallsBack) {
  const std::string why = restore_after_damaging_8(
      [&] { edit_manifest(8, [](json& m) { m["files"][0]["slabs"] = json::array(); }); });
  EXPECT_EQ(why, folder(8) + ": MANIFEST.json does not list one slab per rank");
}

TEST_F(SharedFileCheckpoint, WrongSlabBoundsFallBack) {
  const std::string why = restore_after_damaging_8(
      [&] { edit_manifest(8, [](json& m) { m["files"][0]["slabs"][0]["elements"][0] = 1; }); });
  EXPECT_THAT(why, HasSubstr("the manifest's slab for rank 0 is not elements [0, 300)"));
}

TEST_F(SharedFileCheckpoint, FlippedByteFallsBack) {
  const std::string why =
      restore_after_damaging_8([&] { flip_byte(data_file(8), fs::file_size(data_file(8)) - 64); });
  EXPECT_THAT(why, HasSubstr(data_file(8)));
}

TEST_F(SharedFileCheckpoint, TruncatedFileFallsBack) {
  const std::string why = restore_after_damaging_8(
      [&] { fs::resize_file(data_file(8), fs::file_size(data_file(8)) - 16); });
  EXPECT_THAT(why, HasSubstr(data_file(8) + " has "));
}

}  // namespace
