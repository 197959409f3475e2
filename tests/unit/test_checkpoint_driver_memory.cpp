// A checkpoint's memory cost per save, as training pays it: a state in host memory is written from
// where it lives; a state elsewhere (a GPU's) is exported into a copy made and page-locked before
// step 1 and kept between saves, so no save faults in memory in proportion to the state.
// Page faults are counted, never timed.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "kernels/cpu_backend.h"
#include "tests/unit/one_rank.h"
#include "train/checkpoint_driver.h"
#include "train/faults.h"

namespace {

// The cpu backend, made to look like a device: its state is not in host memory, so a checkpoint
// exports it into a host copy, which this backend counts, like its pins and unpins.
class DeviceLikeBackend final : public tp::ComputeBackend {
 public:
  explicit DeviceLikeBackend(std::unique_ptr<tp::ComputeBackend> inner)
      : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  std::string device() const override { return inner_->device(); }
  uint64_t bytes_needed(const tp::BackendConfig& c) const override {
    return inner_->bytes_needed(c);
  }
  std::optional<uint64_t> memory_available() const override { return inner_->memory_available(); }
  void initialize(const tp::BackendConfig& c) override { inner_->initialize(c); }
  void load_batch(const tp::BatchView& b) override { inner_->load_batch(b); }
  void forward() override { inner_->forward(); }
  void backward_layer(int layer) override { inner_->backward_layer(layer); }
  void set_progress_hook(std::function<void()> hook) override {
    inner_->set_progress_hook(std::move(hook));
  }
  void synchronize() override { inner_->synchronize(); }
  float* gradients() override { return inner_->gradients(); }
  void write_gradients(const float* host, size_t n) override { inner_->write_gradients(host, n); }
  void read_gradients(float* host, size_t n) override { inner_->read_gradients(host, n); }
  void optimizer_step(int64_t step) override { inner_->optimizer_step(step); }
  void export_state(tp::TrainingState& state) override {
    ++exports;
    inner_->export_state(state);
  }
  void import_state(const tp::TrainingState& state) override { inner_->import_state(state); }
  bool pin_host_copy(tp::TrainingState& state) override {
    pinned.push_back(state.params.data());
    return true;
  }
  void unpin_host_copy(tp::TrainingState& state) override {
    unpinned.push_back(state.params.data());
  }
  tp::Digest128 state_digest() override { return inner_->state_digest(); }
  void perturb_state_for_test() override { inner_->perturb_state_for_test(); }
  std::unique_ptr<tp::PhaseClock> make_phase_clock() override { return inner_->make_phase_clock(); }
  double measure_gemm_rate(double s) override { return inner_->measure_gemm_rate(s); }

  int exports = 0;
  std::vector<const float*> pinned, unpinned;

 private:
  std::unique_ptr<tp::ComputeBackend> inner_;
};

// 4 layers x 1024^2, SGD-momentum: 32 MiB of state, 8192 pages.
constexpr uint64_t kStatePages = uint64_t(4) * 1024 * 1024 * 2 * sizeof(float) / 4096;

tp::TrainConfig checkpointing(const std::string& dir, const std::string& layout, bool async) {
  tp::TrainConfig config;
  config.model = tp::ModelSpec{4, 1024, 1, 1};
  config.steps = 2;
  config.seed = 1;
  config.checkpoint_dir = dir;
  config.checkpoint_every = 1;
  config.checkpoint_keep = 1;
  config.checkpoint_layout = layout;
  config.checkpoint_async = async;
  return config;
}

std::unique_ptr<tp::ComputeBackend> cpu_model() {
  tp::BackendConfig c;
  c.layers = 4;
  c.hidden = 1024;
  c.seq = 1;
  c.global_batch = 1;
  c.local_samples = 1;
  c.seed = 1;
  auto backend = tp::make_cpu_backend();
  backend->initialize(c);
  return backend;
}

// Arming the hook makes and page-locks the host copy, before step 1: no save, the first included,
// faults in memory of the state's size, and the copy is unlocked once the run is over.
TEST(CheckpointDriverMemory, ADevicesHostCopyIsMadeAndPinnedBeforeStepOneAndUnpinnedAtTheEnd) {
  for (const bool async : {false, true}) {
    const std::string dir = tp::test::fresh_dir(async ? "DriverPinAsync" : "DriverPinSync");
    DeviceLikeBackend backend(cpu_model());
    const tp::TrainConfig config = checkpointing(dir, "file-per-rank", async);
    const tp::World world = tp::test::one_rank_world();
    const tp::AlignedClock clock;
    tp::FaultInjector faults({}, 0, world.host, dir);
    tp::CheckpointDriver driver(config, world, clock, faults,
                                [](int64_t) { return nlohmann::json::object(); });
    const auto checkpoint = driver.checkpoint_hook(backend);
    ASSERT_EQ(backend.pinned.size(), 1u) << "async=" << async;
    EXPECT_EQ(backend.exports, 1);
    EXPECT_TRUE(backend.unpinned.empty());
    const long before = tp::test::minor_page_faults();
    ASSERT_TRUE(checkpoint(1));
    ASSERT_TRUE(checkpoint(2));
    const long faults_in_saves = tp::test::minor_page_faults() - before;
    driver.finish();
    EXPECT_LT(uint64_t(faults_in_saves), kStatePages / 8)
        << faults_in_saves << " minor page faults in 2 saves of " << kStatePages
        << " pages of state, async=" << async;
    EXPECT_EQ(backend.exports, 3);
    EXPECT_EQ(backend.pinned.size(), 1u) << "one copy, pinned once";
    EXPECT_EQ(backend.unpinned, backend.pinned) << "the copy pinned is the copy unpinned";
    ASSERT_EQ(driver.saves().size(), 2u);
  }
}

// A synchronous save of a state in host memory writes from the model itself: no export, no pin.
TEST(CheckpointDriverMemory, ASynchronousSaveOnTheHostExportsNothing) {
  const std::string dir = tp::test::fresh_dir("DriverHostState");
  const std::unique_ptr<tp::ComputeBackend> backend = cpu_model();
  const tp::TrainConfig config = checkpointing(dir, "file-per-rank", false);
  const tp::World world = tp::test::one_rank_world();
  const tp::AlignedClock clock;
  tp::FaultInjector faults({}, 0, world.host, dir);
  tp::CheckpointDriver driver(config, world, clock, faults,
                              [](int64_t) { return nlohmann::json::object(); });
  const auto checkpoint = driver.checkpoint_hook(*backend);
  const long before = tp::test::minor_page_faults();
  ASSERT_TRUE(checkpoint(1));
  const long faults_in_save = tp::test::minor_page_faults() - before;
  // The first save also pays HDF5's and the store's first allocations (about 550 pages under
  // AddressSanitizer); a copy of the state would fault in all 8192.
  EXPECT_LT(uint64_t(faults_in_save), kStatePages / 4)
      << faults_in_save << " minor page faults in the first save of " << kStatePages
      << " pages of state: the save must write from the model, not a fresh copy";
  driver.finish();
  ASSERT_EQ(driver.saves().size(), 1u);
  EXPECT_GE(driver.saves()[0].bytes, kStatePages * 4096) << "the whole state was written";
}

TEST(CheckpointDriverMemory, SecondSynchronousSaveFaultsInNoMemoryInProportionToTheState) {
  const std::string dir = tp::test::fresh_dir("CheckpointDriverMemory");
  const std::unique_ptr<tp::ComputeBackend> backend = cpu_model();
  const tp::TrainConfig config = checkpointing(dir, "shared-file", false);
  const tp::World world = tp::test::one_rank_world();
  const tp::AlignedClock clock;
  tp::FaultInjector faults({}, 0, world.host, dir);
  tp::CheckpointDriver driver(config, world, clock, faults,
                              [](int64_t) { return nlohmann::json::object(); });
  const auto checkpoint = driver.checkpoint_hook(*backend);
  ASSERT_TRUE(checkpoint(1));  // the first save may touch what the run keeps
  const long before = tp::test::minor_page_faults();
  ASSERT_TRUE(checkpoint(2));
  const long faults_in_save = tp::test::minor_page_faults() - before;
  EXPECT_LT(uint64_t(faults_in_save), kStatePages / 16)
      << faults_in_save << " minor page faults in a save of " << kStatePages << " pages of state";
  driver.finish();
  ASSERT_EQ(driver.saves().size(), 2u);
}

}  // namespace
