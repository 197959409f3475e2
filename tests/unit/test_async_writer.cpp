// The async checkpoint writer on one rank: a submitted snapshot is committed and restorable, at
// most one checkpoint is in flight, and a failure on the writer thread reaches the caller.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/async_writer.h"
#include "common/errors.h"
#include "tests/unit/one_rank.h"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

tp::TrainingState state_at(int64_t step) {
  tp::TrainingState s;
  s.step = step;
  for (int i = 0; i < 200; ++i) {
    s.params.push_back(float(step) + float(i) * 0.5f);
    s.moment1.push_back(float(step) * -2.0f + float(i));
  }
  return s;
}

// Holds the writer at a fault point until the test lets it go, and records the points it
// passed, in order, whichever thread passed them.
class Gate {
 public:
  void at(int64_t step, const char* point) {
    std::unique_lock<std::mutex> lock(mutex_);
    points_.push_back(std::to_string(step) + " " + point);
    if (step == held_step_ && std::string(point) == "ckpt-write") {
      holding_ = true;
      changed_.notify_all();
      changed_.wait(lock, [this] { return !holding_; });
    }
  }
  void hold(int64_t step) {
    std::lock_guard<std::mutex> guard(mutex_);
    held_step_ = step;
  }
  void wait_until_holding() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return holding_; });
  }
  void release() {
    std::lock_guard<std::mutex> guard(mutex_);
    holding_ = false;
    held_step_ = -1;
    changed_.notify_all();
  }
  std::vector<std::string> points() {
    std::lock_guard<std::mutex> guard(mutex_);
    return points_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> points_;
  int64_t held_step_ = -1;
  bool holding_ = false;
};

class AsyncWriter : public ::testing::Test {
 protected:
  void SetUp() override {
    world = tp::test::one_rank_world();
    dir = tp::test::fresh_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    options.dir = dir;
    // The writer's store has its own communicator, as in a run, so its collectives never
    // interleave with the step's.
    writer_world = world;
    ASSERT_EQ(MPI_Comm_dup(world.comm, &writer_world.comm), MPI_SUCCESS);
    writer_store = std::make_unique<tp::CheckpointStore>(options, writer_world, "hash", clock);
    writer_store->set_fault_hook([this](int64_t step, const char* point) { gate.at(step, point); });
  }
  void TearDown() override {
    writer_store.reset();
    MPI_Comm_free(&writer_world.comm);
    fs::remove_all(dir);
  }
  tp::TrainingState restore() {
    tp::CheckpointStore store(options, world, "hash", clock);
    tp::TrainingState restored;
    EXPECT_TRUE(store.restore(restored).has_value());
    return restored;
  }

  tp::World world, writer_world;
  tp::AlignedClock clock;
  tp::CheckpointOptions options;
  std::string dir;
  Gate gate;
  std::unique_ptr<tp::CheckpointStore> writer_store;
};

TEST_F(AsyncWriter, ASubmittedStateIsCommittedAndRestorable) {
  tp::AsyncCheckpointWriter writer(*writer_store);
  writer.submit(state_at(4));
  writer.wait();
  const std::vector<tp::CheckpointSave> saves = writer.take_committed();
  ASSERT_EQ(saves.size(), 1u);
  EXPECT_EQ(saves[0].step, 4);
  EXPECT_EQ(saves[0].bytes, fs::file_size(dir + "/step-00000004/" + tp::rank_checkpoint_file(0)));
  EXPECT_TRUE(writer.take_committed().empty()) << "each save is handed over once";
  const tp::TrainingState restored = restore();
  EXPECT_EQ(restored.step, 4);
  EXPECT_EQ(restored.params, state_at(4).params);
  EXPECT_EQ(restored.moment1, state_at(4).moment1);
}

TEST_F(AsyncWriter, ASecondSubmitWaitsForTheFirstCommit) {
  tp::AsyncCheckpointWriter writer(*writer_store);
  gate.hold(4);
  writer.submit(state_at(4));  // returns while step 4 is being written
  gate.wait_until_holding();
  EXPECT_TRUE(writer.take_committed().empty()) << "nothing is handed over while a save runs";
  EXPECT_FALSE(fs::exists(dir + "/step-00000004"));

  std::atomic<bool> second_submitted{false};
  std::thread trainer([&] {
    writer.submit(state_at(8));
    second_submitted = true;
  });
  // Held at step 4's write: the second submit cannot have returned, and step 8 cannot have
  // started. A broken writer fails this check; a correct one never does, however slow.
  std::this_thread::sleep_for(200ms);
  EXPECT_FALSE(second_submitted.load());
  EXPECT_EQ(gate.points(), (std::vector<std::string>{"4 ckpt-write"}));
  gate.release();
  trainer.join();
  writer.wait();
  EXPECT_EQ(gate.points(), (std::vector<std::string>{"4 ckpt-write", "4 ckpt-commit",
                                                     "8 ckpt-write", "8 ckpt-commit"}));
  const std::vector<tp::CheckpointSave> saves = writer.take_committed();
  ASSERT_EQ(saves.size(), 2u);
  EXPECT_EQ(saves[0].step, 4);
  EXPECT_EQ(saves[1].step, 8);
  EXPECT_EQ(restore().params, state_at(8).params);
}

TEST_F(AsyncWriter, TheWritersFailureIsRethrownByTheNextWait) {
  writer_store->set_fault_hook([](int64_t step, const char* point) {
    if (step == 8 && std::string(point) == "ckpt-write")
      throw tp::RuntimeError("disk vanished at step 8");
  });
  tp::AsyncCheckpointWriter writer(*writer_store);
  writer.submit(state_at(4));
  writer.submit(state_at(8));
  try {
    writer.wait();
    FAIL() << "the writer's failure was lost";
  } catch (const tp::EnvironmentError& e) {
    // Agreed across ranks: every rank throws it alike, naming the checkpoint and the host.
    EXPECT_STREQ(e.what(),
                 "checkpoint step-00000008 was not saved: disk vanished at step 8 (rank 0 on host "
                 "unit-host)");
  }
  EXPECT_NO_THROW(writer.wait()) << "a failure is reported once";
  const std::vector<tp::CheckpointSave> saves = writer.take_committed();
  ASSERT_EQ(saves.size(), 1u);
  EXPECT_EQ(saves[0].step, 4);
  EXPECT_EQ(restore().step, 4);
}

TEST_F(AsyncWriter, DestroyingTheWriterWaitsForTheCheckpointInFlight) {
  {
    tp::AsyncCheckpointWriter writer(*writer_store);
    writer.submit(state_at(6));
  }
  EXPECT_TRUE(fs::exists(dir + "/step-00000006/MANIFEST.json"));
}

// ThreadSanitizer's shadow memory and per-thread traces fault in pages of their own as the writer
// thread runs, so the count is judged by the plain build; the TSan lane still runs the rest.
#if defined(__SANITIZE_THREAD__)
constexpr bool kPageFaultsAreOurs = false;
#else
constexpr bool kPageFaultsAreOurs = true;
#endif

// The snapshot goes into memory the writer touched once, on the first save: a later save faults
// in nothing of the state's size (tens of MB here), neither for the snapshot nor for the write.
TEST_F(AsyncWriter, ASecondSnapshotFaultsInNoMemoryOfTheStatesSize) {
  tp::TrainingState state;
  state.step = 4;
  state.params.assign(size_t(4) << 20, 1.5f);
  state.moment1.assign(size_t(4) << 20, -0.5f);
  state.moment2.assign(size_t(4) << 20, 0.25f);
  const long state_pages = long(3 * state.params.size() * sizeof(float) / 4096);
  tp::AsyncCheckpointWriter writer(*writer_store);
  writer.submit(state);
  writer.wait();
  state.step = 8;
  state.params[12345] = 7.0f;
  const long before = tp::test::minor_page_faults();
  writer.submit(state);
  writer.wait();
  const long faults = tp::test::minor_page_faults() - before;
  if (kPageFaultsAreOurs) {
    EXPECT_LT(faults, state_pages / 16)
        << faults << " page faults for a state of " << state_pages << " pages";
  }
  const std::vector<tp::CheckpointSave> saves = writer.take_committed();
  ASSERT_EQ(saves.size(), 2u);
  EXPECT_GT(saves[1].time_to_durable_s, 0.0);
  EXPECT_GE(saves[1].time_to_durable_s, saves[1].total_s);
  const tp::TrainingState restored = restore();
  EXPECT_EQ(restored.step, 8);
  EXPECT_EQ(restored.params, state.params);
  EXPECT_EQ(restored.moment2, state.moment2);
}

}  // namespace
