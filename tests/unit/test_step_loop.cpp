// The step loop against fake backends: what it calls, in which order, for which steps, and what
// it records. The fakes write every call into one log, so the order across backend, collective,
// batch source and hooks is checked as one sequence.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tests/unit/one_rank.h"
#include "train/step_loop.h"

namespace {

namespace fs = std::filesystem;
using Log = std::vector<std::string>;

// 4 layers of 8x8: 256 bytes of gradient per layer, so a 512-byte bucket holds two layers and
// the plan is two buckets, layers {3, 2} then {1, 0}.
constexpr int kLayers = 4, kHidden = 8, kLayerFloats = kHidden * kHidden;
constexpr double kTwoLayerBucketMb = 512.0 / (1024.0 * 1024.0);

// Phase marks of step k lie at fixed offsets, so each measured step's timings are known exactly:
// data k, compute 2k, exposed comm 3k, optimizer 4k (small integers: exact in double).
class FakePhaseClock final : public tp::PhaseClock {
 public:
  FakePhaseClock(int k, Log& log) : k_(k), log_(log) {}
  void mark(tp::Mark m) override {
    static const char* const kNames[] = {"step_begin", "data_ready", "compute_end", "comm_done",
                                         "optimizer_end"};
    log_.push_back(std::string("mark ") + kNames[int(m)]);
  }
  double seconds_between(tp::Mark from, tp::Mark to) override { return at(to) - at(from); }

 private:
  double at(tp::Mark m) const {
    static const int kOffsets[] = {0, 1, 3, 6, 10};
    return 1000.0 + kOffsets[int(m)] * double(k_);
  }
  int k_;
  Log& log_;
};

class FakeBackend final : public tp::ComputeBackend {
 public:
  FakeBackend(Log& log, const tp::Heartbeat& heartbeat)
      : log_(log), heartbeat_(heartbeat), gradients_(size_t(kLayers) * kLayerFloats) {}

  std::string name() const override { return "fake"; }
  std::string device() const override { return "none"; }
  uint64_t bytes_needed(const tp::BackendConfig&) const override { return 0; }
  std::optional<uint64_t> memory_available() const override { return std::nullopt; }
  void initialize(const tp::BackendConfig&) override { log_.push_back("initialize"); }
  void load_batch(const tp::BatchView& batch) override {
    // The batch source marks each batch with its step in the first input.
    log_.push_back("load_batch " + std::to_string(int(batch.inputs[0])) + " samples " +
                   std::to_string(batch.samples) + in_phase());
  }
  void forward() override { log_.push_back("forward" + in_phase()); }
  void backward_layer(int layer) override {
    log_.push_back("backward " + std::to_string(layer));
    if (progress_) progress_();
  }
  void set_progress_hook(std::function<void()> hook) override {
    log_.push_back(hook ? "progress_hook set" : "progress_hook cleared");
    progress_ = std::move(hook);
  }
  void synchronize() override { log_.push_back("synchronize"); }
  float* gradients() override { return gradients_.data(); }
  void write_gradients(const float*, size_t) override {}
  void read_gradients(float*, size_t) override {}
  void optimizer_step(int64_t step) override {
    log_.push_back("optimizer_step " + std::to_string(step) + in_phase());
  }
  void export_state(tp::TrainingState&) override {}
  void import_state(const tp::TrainingState&) override {}
  tp::Digest128 state_digest() override {
    log_.push_back("state_digest");
    return {0x0123456789abcdefull, 0xfedcba9876543210ull};
  }
  void perturb_state_for_test() override { log_.push_back("perturb_state_for_test"); }
  std::unique_ptr<tp::PhaseClock> make_phase_clock() override {
    return std::make_unique<FakePhaseClock>(++clocks_made_, log_);
  }
  double measure_gemm_rate(double) override { return 0; }

 private:
  // Where the heartbeat says this rank is when the call arrives: the loop beats before each phase.
  std::string in_phase() const {
    const tp::HeartbeatRecord me = heartbeat_.latest();
    return " (heartbeat " + std::to_string(me.step) + " " + me.phase + ")";
  }
  Log& log_;
  const tp::Heartbeat& heartbeat_;
  std::vector<float> gradients_;
  std::function<void()> progress_;
  int clocks_made_ = 0;
};

class FakeCollective final : public tp::Collective {
 public:
  FakeCollective(Log& log, const float* base, const tp::Heartbeat& heartbeat)
      : log_(log), base_(base), heartbeat_(heartbeat) {}
  std::string name() const override { return "fake"; }
  bool posting_waits_for_peers() const override { return waits_for_peers; }
  void start_allreduce_sum(float* data, size_t count) override {
    log_.push_back("start_allreduce " + where(data, count));
    phases_at_post.push_back(heartbeat_.latest().phase);
  }
  void progress() override { ++progress_calls; }
  void wait_all() override { log_.push_back("wait_all"); }
  void allreduce_sum(float* data, size_t count) override {
    log_.push_back("allreduce " + where(data, count));
  }
  // Take k (one a step) has two buckets, [0, 50 + k] and [10, 100 + k]: in flight 100 + k
  // seconds in all, and 50 + k and 90 + k each.
  tp::CommTiming take_comm_timing() override {
    const double k = double(++takes_);
    tp::CommTiming timing;
    timing.buckets = {{0.0, 50.0 + k}, {10.0, 100.0 + k}};
    timing.exposed = device_exposed;
    return timing;
  }
  std::string timing_method(bool) const override { return "fake"; }
  int progress_calls = 0;
  std::optional<double> device_exposed;  // a collective that times comm_exposed on the device
  bool waits_for_peers = false;          // posting may wait for peers, as NCCL's does
  std::vector<std::string> phases_at_post;

 private:
  std::string where(const float* data, size_t count) const {
    return "offset " + std::to_string(data - base_) + " count " + std::to_string(count);
  }
  Log& log_;
  const float* base_;
  const tp::Heartbeat& heartbeat_;
  int takes_ = 0;
};

class FakeBatchSource final : public tp::BatchSource {
 public:
  explicit FakeBatchSource(Log& log) : log_(log) {}
  std::string name() const override { return "fake"; }
  void next(int64_t step, tp::Batch& batch) override {
    log_.push_back("next " + std::to_string(step));
    batch.samples = 2;
    batch.inputs.assign(16, float(step));
    batch.targets.assign(16, 0.0f);
  }

 private:
  Log& log_;
};

// The calls one step makes with overlap on: the batch, forward, backward from the last layer,
// each bucket's reduction started as soon as its lowest layer is done (the host waits for the
// device once, before the first), the wait, the optimizer, then the checkpoint hook.
Log overlapped_step(int64_t s) {
  const std::string n = std::to_string(s);
  return {"mark step_begin",
          "next " + n,
          "load_batch " + n + " samples 2 (heartbeat " + n + " data)",
          "mark data_ready",
          "forward (heartbeat " + n + " compute)",
          "backward 3",
          "backward 2",
          "synchronize",
          "start_allreduce offset 128 count 128",
          "backward 1",
          "backward 0",
          "start_allreduce offset 0 count 128",
          "mark compute_end",
          "wait_all",
          "mark comm_done",
          "optimizer_step " + n + " (heartbeat " + n + " optimizer)",
          "mark optimizer_end",
          "checkpoint hook " + n};
}

class StepLoop : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = tp::test::fresh_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    config.model = {kLayers, kHidden, 2, 4};
    config.steps = 6;
    config.warmup_steps = 2;
    config.bucket_mb = kTwoLayerBucketMb;
    heartbeat = std::make_unique<tp::Heartbeat>(dir + "/beats", 0, "unit-host");
    backend = std::make_unique<FakeBackend>(log, *heartbeat);
    collective = std::make_unique<FakeCollective>(log, backend->gradients(), *heartbeat);
  }
  void TearDown() override {
    heartbeat.reset();
    fs::remove_all(dir);
  }
  tp::TrainResult run(int64_t first_step = 1, tp::CheckpointHook checkpoint = nullptr,
                      tp::StopHook stop = nullptr) {
    tp::StepLoop loop(config, 0, *backend, *collective, source, faults, *heartbeat, clock);
    return loop.run(first_step, std::move(checkpoint), std::move(stop));
  }
  // Records each call, so its place in the sequence is checked; takes a checkpoint every 2nd.
  tp::CheckpointHook logging_checkpoint_hook() {
    return [this](int64_t s) {
      log.push_back("checkpoint hook " + std::to_string(s));
      return s % 2 == 0;
    };
  }

  std::string dir;
  tp::TrainConfig config;
  Log log;
  std::unique_ptr<tp::Heartbeat> heartbeat;
  std::unique_ptr<FakeBackend> backend;
  std::unique_ptr<FakeCollective> collective;
  FakeBatchSource source{log};
  tp::FaultInjector faults{{}, 0, "unit-host", ""};
  tp::AlignedClock clock;
};

TEST_F(StepLoop, EveryStepCallsInOrderWithBucketsReducedAsTheirLayersFinish) {
  const tp::TrainResult result = run(1, logging_checkpoint_hook());
  Log expected = {"progress_hook set"};
  for (int64_t s = 1; s <= 6; ++s) {
    const Log step = overlapped_step(s);
    expected.insert(expected.end(), step.begin(), step.end());
  }
  expected.insert(expected.end(), {"progress_hook cleared", "state_digest"});
  EXPECT_EQ(log, expected);
  EXPECT_EQ(result.steps_run, 6);
  EXPECT_EQ(result.last_step, 6);
  // Between GEMMs the backend lets the collective progress: once per backward layer here.
  EXPECT_EQ(collective->progress_calls, 6 * kLayers);
}

TEST_F(StepLoop, WithoutOverlapEveryBucketIsReducedAfterTheWholeBackward) {
  config.overlap = false;
  config.steps = 1;
  run();
  const Log expected = {"mark step_begin",
                        "next 1",
                        "load_batch 1 samples 2 (heartbeat 1 data)",
                        "mark data_ready",
                        "forward (heartbeat 1 compute)",
                        "backward 3",
                        "backward 2",
                        "backward 1",
                        "backward 0",
                        "mark compute_end",
                        "synchronize",
                        "start_allreduce offset 128 count 128",
                        "start_allreduce offset 0 count 128",
                        "wait_all",
                        "mark comm_done",
                        "optimizer_step 1 (heartbeat 1 optimizer)",
                        "mark optimizer_end",
                        "progress_hook cleared",
                        "state_digest"};
  EXPECT_EQ(log, expected);
  EXPECT_EQ(collective->progress_calls, 0) << "no progress hook without overlap";
}

TEST_F(StepLoop, OneBucketPerLayerWhenALayerFillsABucket) {
  config.bucket_mb = 1e-9;
  config.steps = 1;
  run();
  Log reductions;
  for (const std::string& line : log)
    if (line.rfind("start_allreduce", 0) == 0) reductions.push_back(line);
  EXPECT_EQ(reductions,
            (Log{"start_allreduce offset 192 count 64", "start_allreduce offset 128 count 64",
                 "start_allreduce offset 64 count 64", "start_allreduce offset 0 count 64"}));
}

TEST_F(StepLoop, TimingsAreRecordedForMeasuredStepsOnly) {
  const tp::TrainResult result = run(1, logging_checkpoint_hook());
  ASSERT_EQ(result.measured.size(), 4u) << "6 steps, 2 of them warm-up";
  for (size_t i = 0; i < result.measured.size(); ++i) {
    const tp::StepTiming& t = result.measured[i];
    const int64_t step = 3 + int64_t(i);  // the fake clock of step k gives data k, compute 2k...
    const double k = double(step);
    EXPECT_EQ(t.data, k) << step;
    EXPECT_EQ(t.compute, 2 * k) << step;
    EXPECT_EQ(t.comm_exposed, 3 * k) << step;
    EXPECT_EQ(t.optimizer, 4 * k) << step;
    EXPECT_EQ(t.comm, 100.0 + k) << step << ": the buckets' union, taken once a step";
    EXPECT_EQ(result.bucket_seconds[i], (std::vector<double>{50.0 + k, 90.0 + k})) << step;
    // A step that took no checkpoint has no checkpoint time; one that did, its hook's time.
    if (step % 2 == 1) {
      EXPECT_EQ(t.checkpoint, 0.0) << step;
    } else {
      EXPECT_GE(t.checkpoint, 0.0) << step;
    }
    EXPECT_DOUBLE_EQ(t.step, 10 * k + t.checkpoint) << step;
    EXPECT_GT(t.arrival, 0.0) << step << ": stamped at the first collective";
  }
}

// The trace's samples: each measured step's number and start, and its buckets placed from the
// step's start with the first at the arrival (the fake's buckets start at 0 and 10 on its clock).
TEST_F(StepLoop, TheTraceGetsEachMeasuredStepsStartAndBucketIntervals) {
  const tp::TrainResult result = run();
  EXPECT_EQ(result.measured_steps, (std::vector<int64_t>{3, 4, 5, 6}));
  ASSERT_EQ(result.step_start.size(), 4u);
  ASSERT_EQ(result.bucket_intervals.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const double k = double(3 + i), arrival = result.measured[i].arrival - result.step_start[i];
    EXPECT_GE(arrival, 0.0) << "the first collective comes after the step's start";
    ASSERT_EQ(result.bucket_intervals[i].size(), 2u);
    EXPECT_DOUBLE_EQ(result.bucket_intervals[i][0].start, arrival);
    EXPECT_DOUBLE_EQ(result.bucket_intervals[i][0].end, arrival + 50.0 + k);
    EXPECT_DOUBLE_EQ(result.bucket_intervals[i][1].start, arrival + 10.0);
    EXPECT_DOUBLE_EQ(result.bucket_intervals[i][1].end, arrival + 100.0 + k);
    if (i > 0) {
      EXPECT_GE(result.step_start[i], result.step_start[i - 1]);
    }
  }
}

// A rank stuck posting a bucket to NCCL waits for a peer: its heartbeat says comm there, and
// compute again once the post returns. Where posting waits only for the rank's own device (a
// host-staged copy), the heartbeat keeps saying compute.
TEST_F(StepLoop, PostingThatMayWaitForPeersIsInComm) {
  config.steps = 1;
  collective->waits_for_peers = true;
  run();
  EXPECT_EQ(collective->phases_at_post, (std::vector<std::string>{"comm", "comm"}));
  const auto backward = std::find(log.begin(), log.end(), "mark compute_end");
  ASSERT_NE(backward, log.end());
  collective->phases_at_post.clear();
  collective->waits_for_peers = false;
  run();
  EXPECT_EQ(collective->phases_at_post, (std::vector<std::string>{"compute", "compute"}));
}

TEST_F(StepLoop, ADeviceTimedExposedWaitReplacesTheHostsView) {
  collective->device_exposed = 0.25;
  config.steps = 1;
  config.warmup_steps = 0;
  const tp::TrainResult result = run();
  ASSERT_EQ(result.measured.size(), 1u);
  EXPECT_EQ(result.measured[0].comm_exposed, 0.25);
}

TEST(BusySeconds, IsTheUnionOfTheBucketsIntervals) {
  EXPECT_EQ(tp::busy_seconds({}), 0.0);
  EXPECT_EQ(tp::busy_seconds({{0, 2}, {1, 3}, {5, 6}}), 4.0);
  EXPECT_EQ(tp::busy_seconds({{5, 6}, {0, 10}, {1, 2}}), 10.0) << "in any order, nested";
  EXPECT_EQ(tp::busy_seconds({{0, 1}, {1, 2}}), 2.0) << "touching";
}

TEST_F(StepLoop, ArrivalIsStampedOnTheAlignedClock) {
  // A clock a day ahead: the arrival must come from it, not from the phase clock.
  clock = tp::AlignedClock(86400.0);
  config.steps = 1;
  config.warmup_steps = 0;
  const tp::TrainResult result = run();
  ASSERT_EQ(result.measured.size(), 1u);
  EXPECT_GE(result.measured[0].arrival, 86400.0);
}

TEST_F(StepLoop, AResumedRunStartsAtItsFirstStepAndWarmsUpAgain) {
  const tp::TrainResult result = run(4);
  EXPECT_EQ(result.steps_run, 3);
  EXPECT_EQ(result.last_step, 6);
  ASSERT_EQ(result.measured.size(), 1u) << "steps 4 and 5 warm up";
  EXPECT_EQ(result.measured[0].data, 3.0) << "the third step this process ran";
  Log batches;
  for (const std::string& line : log)
    if (line.rfind("next ", 0) == 0) batches.push_back(line);
  EXPECT_EQ(batches, (Log{"next 4", "next 5", "next 6"}));
}

TEST_F(StepLoop, CheckpointHookIsAskedAfterEveryStepsOptimizer) {
  std::vector<int64_t> asked;
  run(2, [&](int64_t s) {
    asked.push_back(s);
    // The step's state is complete: the heartbeat says so before the hook runs.
    EXPECT_EQ(heartbeat->latest().phase, "checkpoint");
    EXPECT_EQ(heartbeat->latest().step, s);
    return false;
  });
  EXPECT_EQ(asked, (std::vector<int64_t>{2, 3, 4, 5, 6}));
}

TEST_F(StepLoop, StopHookEndsTheRunAfterThatStep) {
  std::vector<int64_t> asked;
  const tp::TrainResult result = run(1, logging_checkpoint_hook(), [&](int64_t s) {
    asked.push_back(s);
    return s == 4;
  });
  EXPECT_EQ(asked, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(result.steps_run, 4);
  EXPECT_EQ(result.last_step, 4);
  EXPECT_EQ(result.measured.size(), 2u);
  // Step 4 completed, its checkpoint hook included; nothing of step 5 ran.
  EXPECT_THAT(log, ::testing::Contains("checkpoint hook 4"));
  EXPECT_THAT(log, ::testing::Not(::testing::Contains("next 5")));
  EXPECT_EQ(log.back(), "state_digest");
  const auto beats = tp::Heartbeat::read_all(heartbeat->dir(), 1);
  EXPECT_EQ(beats[0].step, 4);
  EXPECT_EQ(beats[0].phase, "done");
}

TEST_F(StepLoop, DigestIsTheBackendsAfterTheLastStep) {
  const tp::TrainResult result = run();
  EXPECT_EQ(result.digest, (tp::Digest128{0x0123456789abcdefull, 0xfedcba9876543210ull}));
  EXPECT_EQ(log.back(), "state_digest");
  const auto beats = tp::Heartbeat::read_all(heartbeat->dir(), 1);
  EXPECT_EQ(beats[0].step, 6);
  EXPECT_EQ(beats[0].phase, "done");
}

TEST_F(StepLoop, PerturbationHookFlipsStateBeforeTheDigestOnItsRankOnly) {
  config.test.perturb_state_rank = 0;
  run();
  ASSERT_GE(log.size(), 2u);
  EXPECT_EQ(log[log.size() - 2], "perturb_state_for_test");
  log.clear();
  config.test.perturb_state_rank = 1;
  run();
  EXPECT_THAT(log, ::testing::Not(::testing::Contains("perturb_state_for_test")));
}

TEST_F(StepLoop, AKillFaultStrikesOnEnteringItsPhaseAfterTheHeartbeatMoved) {
  // The drill reads where a kill struck from the victim's record and the heartbeat; both must say
  // step 2, compute, and nothing of step 2's compute may have run.
  config.steps = 3;
  faults = tp::FaultInjector({tp::parse_fault("kill:rank=0,step=2,phase=compute")}, 0, "unit-host",
                             heartbeat->dir());
  EXPECT_EXIT(
      {
        run();
        std::_Exit(0);
      },
      ::testing::KilledBySignal(SIGKILL), "");
  const auto fired = tp::read_fired_faults(heartbeat->dir());
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0].step, 2);
  EXPECT_EQ(fired[0].phase, "compute");
  EXPECT_EQ(fired[0].rank, 0);
  const auto beats = tp::Heartbeat::read_all(heartbeat->dir(), 1);
  EXPECT_EQ(beats[0].step, 2);
  EXPECT_EQ(beats[0].phase, "compute");
}

}  // namespace
