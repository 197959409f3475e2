// The checkpoint store on one rank (MPI_COMM_SELF): what counts as committed, retention, what a
// crash at each point of the commit protocol leaves, and the folder preflight.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "checkpoint/store.h"
#include "common/errors.h"
#include "tests/unit/checkpoint_store_case.h"

namespace {

using namespace tp::test;
using ::testing::HasSubstr;
using ::testing::StartsWith;

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

// A save that fails (a full disk, an I/O error) is learned by every rank alike, and what it wrote
// is deleted, so its space is free again.
TEST_F(CheckpointStore, AFailedSaveIsAnEnvironmentErrorAndLeavesNoPartialFolder) {
  save_steps({4});
  auto s = store();
  s.set_fault_hook([](int64_t, const char* point) {
    if (std::string(point) == "ckpt-write")
      throw tp::RuntimeError("write 'x': No space left on device");
  });
  try {
    s.save(state_at(8));
    FAIL() << "the save reported no failure";
  } catch (const tp::EnvironmentError& e) {
    EXPECT_STREQ(e.what(),
                 "checkpoint step-00000008 was not saved: write 'x': No space left on device "
                 "(rank 0 on host unit-host)");
  }
  EXPECT_EQ(listing(dir), std::set<std::string>{"step-00000004"});
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
  // The lock file stays: deleting it would let a job waiting on it lock a file no later job sees.
  EXPECT_EQ(listing(dir), std::set<std::string>{tp::kFolderLockFile});
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

}  // namespace
