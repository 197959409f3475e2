// A GPU's figure against its peers (node/gpu_peers.h, docs/node-check.md), and NVML's bus ids as
// sysfs spells them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpu/nvml.h"
#include "node/gpu_peers.h"

namespace {

using ::testing::HasSubstr;

TEST(Nvml, BusIdsAreComparedAsSysfsSpellsThem) {
  EXPECT_EQ(tp::sysfs_pci_address("00000000:9A:00.0"), "0000:9a:00.0");
  EXPECT_EQ(tp::sysfs_pci_address("0000:9A:00.0"), "0000:9a:00.0");
  EXPECT_EQ(tp::sysfs_pci_address("00010000:1B:00.0"), "10000:1b:00.0");  // a VMD domain
}

// 8 GPUs on each of 64 nodes, each at 1000 TFLOP/s times a factor spread evenly within +-5%
// (a fixed sequence: the same figures every run).
std::vector<tp::GpuFigure> burn_figures(unsigned seed) {
  std::vector<tp::GpuFigure> figures;
  uint64_t state = seed * 2654435761u + 1;
  for (int node = 0; node < 64; ++node)
    for (int gpu = 0; gpu < 8; ++gpu) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      const double unit = double(state >> 11) / double(1ULL << 53);  // [0, 1)
      figures.push_back(
          {"gpu-node-" + std::to_string(100 + node), gpu, "", 1000 * (0.95 + 0.1 * unit)});
    }
  return figures;
}

TEST(GpuPeers, AHealthySpreadOfFivePercentFlagsNoGpuAtTheDefaults) {
  for (unsigned seed = 1; seed <= 20; ++seed) {
    const tp::PeerJudgement j = tp::judge_gpu_peers(burn_figures(seed), {}, "GEMM", "TFLOP/s");
    EXPECT_TRUE(j.flags.empty()) << "seed " << seed << ": " << j.flags.front().reason;
    EXPECT_NEAR(j.median, 1000, 10);
    EXPECT_LT(j.noise, 0.03);
  }
}

TEST(GpuPeers, OneGpuAt85PercentOfItsPeersIsFlaggedAloneAndNamed) {
  for (unsigned seed = 1; seed <= 20; ++seed) {
    std::vector<tp::GpuFigure> figures = burn_figures(seed);
    figures[8 * 37 + 5].value = 850;  // gpu-node-137, GPU 5
    const tp::PeerJudgement j = tp::judge_gpu_peers(figures, {}, "GEMM", "TFLOP/s");
    ASSERT_EQ(j.flags.size(), 1u) << "seed " << seed;
    EXPECT_EQ(j.flags[0].index, size_t(8 * 37 + 5));
    EXPECT_EQ(j.flags[0].status, "warn");  // between the bands: 0.8 - noise < ratio < 0.9 - noise
    EXPECT_EQ(j.flags[0].reference_name, "the best GPU of its node");
    EXPECT_THAT(j.flags[0].reason, HasSubstr("gpu-node-137: GPU 5: GEMM 850 TFLOP/s, 8"));
  }
}

TEST(GpuPeers, ASlowNodeIsHeldToTheJobAndAFloorFailsWhateverTheSpread) {
  std::vector<tp::GpuFigure> figures = burn_figures(3);
  for (int gpu = 0; gpu < 8; ++gpu) figures[8 * 10 + size_t(gpu)].value *= 0.7;  // all of node 110
  tp::PeerRules rules;
  rules.floor = 900;
  const tp::PeerJudgement j = tp::judge_gpu_peers(figures, rules, "GEMM", "TFLOP/s");
  ASSERT_EQ(j.flags.size(), 8u);
  for (const tp::PeerFlag& f : j.flags) {
    EXPECT_EQ(f.status, "fail");
    EXPECT_EQ(f.reference_name, "the job's median GPU");
    EXPECT_THAT(f.reason, HasSubstr("below the host file's floor of 900 TFLOP/s"));
  }
  EXPECT_TRUE(tp::judge_gpu_peers({}, rules, "GEMM", "TFLOP/s").flags.empty());
}

}  // namespace
