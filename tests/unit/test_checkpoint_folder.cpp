// The checkpoint folder as one job owns it, on one rank (MPI_COMM_SELF): the lock the preflight
// takes, the leftovers it removes (and what it leaves alone), other scenarios' checkpoints, the
// free space, and the expected size of a checkpoint.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>

#include "checkpoint/folder_lock.h"
#include "checkpoint/store.h"
#include "common/errors.h"
#include "tests/unit/checkpoint_store_case.h"

namespace {

using namespace tp::test;
using ::testing::HasSubstr;

std::string lock_path(const std::string& dir) {
  return dir + "/" + tp::kFolderLockFile;
}

TEST_F(CheckpointStore, PreflightHoldsTheFolderLockWhileTheStoreLives) {
  {
    auto s = store();
    s.preflight();
    const tp::FolderLock other = tp::FolderLock::take(lock_path(dir), 0, "other-host");
    EXPECT_EQ(other.state(), tp::FolderLock::State::busy);
    EXPECT_EQ(other.holder(), "host unit-host, pid " + std::to_string(::getpid()));
  }
  EXPECT_TRUE(tp::FolderLock::take(lock_path(dir), 0, "other-host").held())
      << "the lock outlived its store";
}

TEST_F(CheckpointStore, ASecondJobIsAUsageErrorNamingTheHolderAfterItsWait) {
  const tp::FolderLock holder = tp::FolderLock::take(lock_path(dir), 0, "node-a");
  ASSERT_TRUE(holder.held());
  options.lock_wait_s = 0.2;
  try {
    store().preflight();
    FAIL() << "a second job took a folder another job holds";
  } catch (const tp::UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("checkpoint.dir '" + dir +
                                    "' is in use by another job: host "
                                    "node-a, pid " +
                                    std::to_string(::getpid())));
    EXPECT_THAT(e.what(), HasSubstr("checkpoint.lock_wait_s=0.2 s"));
  }
}

TEST_F(CheckpointStore, PreflightRemovesOnlyTheLeftoversItOwns) {
  save_steps({4});
  const std::set<std::string> leftovers = {"step-00000100.partial", "step-00000002.deleting",
                                           ".preflight-rank-0", ".preflight-rank-17"};
  const std::set<std::string> kept = {"step-00000004",
                                      "step-00000003.corrupt",
                                      "notes.txt",
                                      "step-7.partial",
                                      "other.deleting",
                                      ".preflight-rank-x",
                                      "step-00000009.partial.bak",
                                      "step-00000005.partialx"};
  for (const std::string& name : leftovers) {
    if (name[0] == '.')
      write_text(dir + "/" + name, "a probe");
    else
      fs::create_directories(dir + "/" + name + "/inside");
  }
  for (const std::string& name : kept)
    if (!fs::exists(dir + "/" + name)) write_text(dir + "/" + name, "not the store's");
  store().preflight();
  std::set<std::string> expected = kept;
  expected.insert(tp::kFolderLockFile);
  EXPECT_EQ(listing(dir), expected);
  EXPECT_EQ(read_text(dir + "/notes.txt"), "not the store's");
}

TEST_F(CheckpointStore, AnotherScenariosCheckpointsRefuseAFreshStartNamingBothHashes) {
  save_steps({4, 8});
  tp::PreflightPlan fresh;
  fresh.fresh_start = true;
  try {
    store("scenario-hash-b").preflight(fresh);
    FAIL() << "a fresh start accepted another scenario's checkpoints";
  } catch (const tp::UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("scenario hash scenario-hash-a"));
    EXPECT_THAT(e.what(), HasSubstr("this run's scenario hash is scenario-hash-b"));
    EXPECT_THAT(e.what(), HasSubstr("--checkpoint.overwrite=true"));
  }
  EXPECT_EQ(tp::CheckpointStore::committed_in(dir).size(), 2u) << "nothing may be deleted";
  // The same scenario starting fresh is no error, nor is a resume (which the restore checks).
  EXPECT_NO_THROW(store().preflight(fresh));
  EXPECT_NO_THROW(store("scenario-hash-b").preflight());
}

TEST_F(CheckpointStore, OverwriteDeletesAnotherScenariosCheckpointsAndSaysSo) {
  save_steps({4, 8});
  options.overwrite = true;
  tp::PreflightPlan fresh;
  fresh.fresh_start = true;
  const tp::CheckpointFolderFacts facts = store("scenario-hash-b").preflight(fresh);
  EXPECT_EQ(listing(dir), std::set<std::string>{tp::kFolderLockFile});
  ASSERT_EQ(facts.warnings.size(), 1u);
  EXPECT_THAT(facts.warnings[0], HasSubstr("deleted 2 checkpoint(s) of scenario hash "
                                           "scenario-hash-a"));
}

TEST_F(CheckpointStore, AFolderTooSmallForKeepPlusOneCheckpointsIsAUsageError) {
  options.keep = 2;
  tp::PreflightPlan plan;
  plan.checkpoint_bytes = uint64_t(1) << 60;
  try {
    store().preflight(plan);
    FAIL() << "the preflight accepted checkpoints larger than the disk";
  } catch (const tp::UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("on host unit-host has "));
    EXPECT_THAT(e.what(),
                HasSubstr("this run needs " + std::to_string(uint64_t(3) << 60) + " bytes"));
    EXPECT_THAT(e.what(), HasSubstr("checkpoint.keep=2"));
  }
  plan.checkpoint_bytes = 1 << 20;
  EXPECT_NO_THROW(store().preflight(plan));
}

TEST_F(CheckpointStore, CheckpointsAlreadyThereCountTowardTheSpaceNeeded) {
  save_steps({4, 8});
  const uint64_t one = fs::file_size(data_file(8)) + fs::file_size(manifest(8));
  tp::PreflightPlan plan;
  plan.checkpoint_bytes = uint64_t(1) << 60;
  options.keep = 2;
  try {
    store().preflight(plan);
    FAIL() << "the preflight accepted checkpoints larger than the disk";
  } catch (const tp::UsageError& e) {
    // Two checkpoints are there already: the third and the one being written are needed.
    EXPECT_THAT(e.what(), HasSubstr("less the " + std::to_string(2 * one) + " bytes"));
  }
}

TEST_F(CheckpointStore, TheExpectedSizeIsTheWrittenSizeAndALittleMore) {
  for (const auto layout : {tp::CheckpointLayout::file_per_rank, tp::CheckpointLayout::shared_file})
    for (const bool adam : {false, true}) {
      fs::remove_all(dir);
      fs::create_directories(dir);
      options.layout = layout;
      save_steps({4}, adam);
      const uint64_t written = fs::file_size(data_file(4)) + fs::file_size(manifest(4));
      const uint64_t expected = store().expected_bytes(kElements, adam);
      EXPECT_GE(expected, written);
      EXPECT_LE(expected, written + (64 << 10));
    }
}

}  // namespace
