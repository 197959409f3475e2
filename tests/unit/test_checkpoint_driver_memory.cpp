// A synchronous checkpoint's memory cost per save, as training pays it: the state is exported into
// a copy kept between saves, so a second save faults in no memory in proportion to the state.
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

TEST(CheckpointDriverMemory, SecondSynchronousSaveFaultsInNoMemoryInProportionToTheState) {
  const std::string dir = tp::test::fresh_dir("CheckpointDriverMemory");
  tp::TrainConfig config;
  // 4 layers x 1024^2, SGD-momentum: 32 MiB of state, 8192 pages.
  config.model = tp::ModelSpec{4, 1024, 1, 1};
  config.steps = 2;
  config.seed = 1;
  config.checkpoint_dir = dir;
  config.checkpoint_every = 1;
  config.checkpoint_keep = 1;
  config.checkpoint_layout = "shared-file";
  tp::BackendConfig backend_config;
  backend_config.layers = 4;
  backend_config.hidden = 1024;
  backend_config.seq = 1;
  backend_config.global_batch = 1;
  backend_config.local_samples = 1;
  backend_config.seed = 1;
  const std::unique_ptr<tp::ComputeBackend> backend = tp::make_cpu_backend();
  backend->initialize(backend_config);
  const tp::World world = tp::test::one_rank_world();
  const tp::AlignedClock clock;
  tp::FaultInjector faults({}, 0, world.host, dir);
  tp::CheckpointDriver driver(config, world, clock, faults,
                              [](int64_t) { return nlohmann::json::object(); });
  const auto checkpoint = driver.checkpoint_hook(*backend);
  ASSERT_TRUE(checkpoint(1));  // the first save may touch what the run keeps
  const uint64_t state_pages = uint64_t(4) * 1024 * 1024 * 2 * sizeof(float) / 4096;
  const long before = tp::test::minor_page_faults();
  ASSERT_TRUE(checkpoint(2));
  const long faults_in_save = tp::test::minor_page_faults() - before;
  EXPECT_LT(uint64_t(faults_in_save), state_pages / 16)
      << faults_in_save << " minor page faults in a save of " << state_pages << " pages of state";
  driver.finish();
  ASSERT_EQ(driver.saves().size(), 2u);
}

}  // namespace
