// The checkpoint store on one rank (MPI_COMM_SELF): verified restore with fallback past damage,
// in both layouts, and the errors that name both sides of a mismatch. The multi-rank cases (slices
// over ranks, agreement, async beside the step's collectives) stay in tests/integration.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "checkpoint/slices.h"
#include "checkpoint/store.h"
#include "common/errors.h"
#include "tests/unit/checkpoint_store_case.h"

namespace {

using namespace tp::test;
using ::testing::HasSubstr;
using ::testing::StartsWith;

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
  EXPECT_EQ(why, folder(8) +
                     ": MANIFEST.json says files[0] holds elements [0, 300) of 301, not the whole "
                     "state");
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

// Tens of MB per tensor: a copy or a zero-filled buffer of the state's size faults in thousands
// of pages, far more than HDF5's own small allocations.
tp::TrainingState large_state(int64_t step) {
  tp::TrainingState s;
  s.step = step;
  const size_t n = size_t(4) << 20;
  s.params.assign(n, 0.5f);
  s.moment1.assign(n, -0.25f);
  s.moment2.assign(n, 0.125f);
  for (size_t i = 0; i < n; i += 4099) s.params[i] = float(i);
  return s;
}

TEST_F(CheckpointStore, ASecondSaveFaultsInNoMemoryOfTheStatesSize) {
  for (const bool sharded : {false, true}) {
    options.shard_optimizer = sharded;
    auto s = store();
    tp::TrainingState state = large_state(4);
    s.save(state);  // the first save may touch what it keeps for the next ones
    state.step = 8;
    const long before = tp::test::minor_page_faults();
    const tp::CheckpointSave save = s.save(state);
    const long faults = tp::test::minor_page_faults() - before;
    const long state_pages = long(tp::state_bytes(state) / 4096);
    EXPECT_LT(faults, state_pages / 16)
        << "sharded " << sharded << ": " << faults << " page faults for a state of " << state_pages
        << " pages";
    EXPECT_GT(save.bytes, tp::state_bytes(state));
    tp::TrainingState restored = large_state(0);
    const auto result = store().restore(restored);
    ASSERT_TRUE(result.has_value());
    EXPECT_EQ(result->step, 8);
    EXPECT_EQ(restored.params, state.params);
    EXPECT_EQ(restored.moment2, state.moment2);
  }
}

}  // namespace
