#include <gtest/gtest.h>

#include "app/stages/backend_selection.h"
#include "checkpoint/memory_need.h"

namespace {

using tp::checkpoint_memory_need;
using tp::CheckpointMemoryPlan;

// 1000 elements per tensor, parameters and one moment: an 8000-byte state.
CheckpointMemoryPlan plan() {
  CheckpointMemoryPlan p;
  p.elements = 1000;
  p.tensors = 2;
  return p;
}

// docs/checkpoint.md, "Memory": one host copy of the state, reused by every save; the files are
// written from it in place, sliced or not, sync or async.
TEST(CheckpointMemory, EverySaveNeedsOneCopyOfTheState) {
  EXPECT_EQ(checkpoint_memory_need(plan()), 8000u);
}

// A synchronous save of a state in host memory writes from the model's own buffers.
TEST(CheckpointMemory, WritingFromTheModelNeedsNoCopy) {
  auto p = plan();
  p.writes_from_model = true;
  EXPECT_EQ(checkpoint_memory_need(p), 0u);
}

TEST(CheckpointMemory, AdamsSecondMomentCounts) {
  auto p = plan();
  p.tensors = 3;
  EXPECT_EQ(checkpoint_memory_need(p), 12000u);
}

}  // namespace

namespace {

// 2 layers x 1000 hidden: 2e6 parameters, a 16 MB state with SGD-momentum, at 2 ranks of a host
// whose model takes 10 MB per rank. The need itself is the formula's (tested above).
tp::TrainConfig checkpointing(bool async) {
  tp::TrainConfig cfg;
  cfg.model = {2, 1000, 8, 8};
  cfg.checkpoint_dir = "ckpt";
  cfg.checkpoint_async = async;
  return cfg;
}

uint64_t need_of(const tp::TrainConfig& cfg) {
  tp::CheckpointMemoryPlan plan;
  plan.elements = uint64_t(cfg.model.parameters());
  return tp::checkpoint_memory_need(plan);
}

// What 2 ranks need on the host, over the 0.9 of the available memory the check allows.
uint64_t available_for(uint64_t needed, double share) {
  return uint64_t(double(needed) / 0.9 / share);
}

TEST(CheckpointMemory, AModelThatFitsWithItsCheckpointsStarts) {
  for (const bool async : {false, true}) {
    const uint64_t needed = 2 * (10'000'000 + need_of(checkpointing(async)));
    const tp::HostMemory host{10'000'000, 2, available_for(needed, 0.95), "node-a"};
    EXPECT_EQ(tp::checkpoint_memory_problem(checkpointing(async), host), "");
  }
}

TEST(CheckpointMemory, CheckpointsThatDoNotFitNameTheOptionsAndTheBytes) {
  for (const bool async : {false, true}) {
    const uint64_t need = need_of(checkpointing(async));
    if (need == 0) continue;  // nothing beyond the model: nothing to refuse
    const uint64_t needed = 2 * (10'000'000 + need);
    const uint64_t available = available_for(needed, 1.05);
    const tp::HostMemory host{10'000'000, 2, available, "node-a"};
    const std::string problem = tp::checkpoint_memory_problem(checkpointing(async), host);
    for (const std::string& word :
         {std::string("checkpoint.async=") + (async ? "true" : "false"),
          std::string("checkpoint.layout=file-per-rank"), std::string("node-a"),
          std::to_string(need) + " bytes per rank", std::to_string(needed) + " bytes needed",
          std::to_string(available) + " bytes available"})
      EXPECT_NE(problem.find(word), std::string::npos) << word << " in: " << problem;
  }
}

// On the cpu backend only the async snapshot needs memory beyond the model: a host that holds just
// the model runs sync checkpoints and refuses async ones.
TEST(CheckpointMemory, OnTheHostOnlyTheAsyncSnapshotNeedsMemory) {
  const tp::HostMemory host{10'000'000, 2, available_for(2 * 10'000'000, 0.95), "node-a", true};
  EXPECT_EQ(tp::checkpoint_memory_problem(checkpointing(false), host), "");
  EXPECT_NE(tp::checkpoint_memory_problem(checkpointing(true), host).find("checkpoint.async=true"),
            std::string::npos);
}

TEST(CheckpointMemory, NothingToCheckWithoutCheckpointsOrAKnownSize) {
  tp::TrainConfig cfg = checkpointing(false);
  cfg.checkpoint_dir.clear();
  EXPECT_EQ(tp::checkpoint_memory_problem(cfg, {10'000'000, 2, 1000, "node-a"}), "");
  EXPECT_EQ(
      tp::checkpoint_memory_problem(checkpointing(false), {10'000'000, 2, std::nullopt, "node-a"}),
      "");
}

// A GPU rank holds its batch in pinned host memory, and reducing over MPI, the whole gradient.
TEST(GpuHostStaging, TheGradientCountsOnlyWhenMpiStagesIt) {
  tp::BackendConfig bc{};
  bc.layers = 4;
  bc.hidden = 1024;
  bc.seq = 128;
  bc.local_samples = 2;
  const uint64_t batch = 2 * 4 * 2 * 128 * 1024;
  EXPECT_EQ(tp::gpu_host_staging_bytes(bc, false), batch);
  EXPECT_EQ(tp::gpu_host_staging_bytes(bc, true), batch + 4ull * 4 * 1024 * 1024);
}

TEST(GpuHostStaging, EightRanksThatDoNotFitAreRefusedWithTheFigures) {
  tp::TrainConfig cfg;
  const uint64_t per_rank = 1ull << 30;
  EXPECT_EQ(tp::gpu_host_staging_problem(cfg, true, {per_rank, 8, 10ull << 30, "gpu-a"}), "");
  const std::string problem =
      tp::gpu_host_staging_problem(cfg, true, {per_rank, 8, 8ull << 30, "gpu-a"});
  EXPECT_NE(problem.find("on host gpu-a: 8 ranks x 1.00 GiB = 8.00 GiB needed, 8.00 GiB "
                         "available (the batch and the whole gradient, reduced over MPI"),
            std::string::npos)
      << problem;
  EXPECT_EQ(tp::gpu_host_staging_problem(cfg, true, {per_rank, 8, std::nullopt, "gpu-a"}), "");
}

}  // namespace

// compute.backend=auto on a job whose ranks disagree about GPUs (fake inventories: which ranks see
// a usable one).
TEST(MixedGpus, AllOrNoneIsFineSomeWithAndSomeWithoutNamesTheHosts) {
  const std::vector<std::string> hosts = {"g1", "g1", "c1", "c1", "g2", "c2"};
  EXPECT_EQ(tp::mixed_gpu_problem(hosts, std::vector<bool>(6, true)), "");
  EXPECT_EQ(tp::mixed_gpu_problem(hosts, std::vector<bool>(6, false)), "") << "the CPU for all";
  EXPECT_EQ(tp::mixed_gpu_problem(hosts, {true, true, false, false, true, false}),
            "compute.backend=auto: 3 of 6 ranks have no usable GPU (hosts c1, c2), the others "
            "do; fix those hosts, or ask for compute.backend=cpu");
}

TEST(MixedGpus, AtScaleTheFirstEightHostsAreNamedAndTheRestCounted) {
  std::vector<std::string> hosts;
  std::vector<bool> has_gpu;
  for (int node = 0; node < 512; ++node) {
    std::string name = "n";
    name += std::to_string(node);
    for (int local = 0; local < 8; ++local) {
      hosts.push_back(name);
      has_gpu.push_back(node % 32 != 5);  // 16 nodes without a GPU
    }
  }
  const std::string problem = tp::mixed_gpu_problem(hosts, has_gpu);
  EXPECT_NE(problem.find("128 of 4096 ranks have no usable GPU (hosts n5, n37, n69, n101, n133, "
                         "n165, n197, n229 and 8 more)"),
            std::string::npos)
      << problem;
}
