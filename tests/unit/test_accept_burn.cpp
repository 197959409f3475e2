// accept --level=full's judgement across nodes (app/accept/accept_burn.h): what the job adds to
// each node's own, a GPU below the job's median GPU, on synthetic records of 64 nodes x 8 GPUs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "app/accept/accept_burn.h"

namespace {

using ::testing::HasSubstr;

// 64 nodes of 8 GPUs, every figure within +-5% of its healthy value (a fixed sequence).
std::vector<tp::NodeBurn> healthy_job(unsigned seed) {
  std::vector<tp::NodeBurn> nodes;
  uint64_t state = seed * 2654435761u + 1;
  const auto spread = [&state]() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return 0.95 + 0.1 * double(state >> 11) / double(1ULL << 53);
  };
  for (int node = 0; node < 64; ++node) {
    tp::NodeBurn n;
    n.host = "gpu-node-" + std::to_string(100 + node);
    n.backend = "cuda";
    for (int gpu = 0; gpu < 8; ++gpu)
      n.devices.push_back({gpu, "GPU-" + std::to_string(node * 8 + gpu), "", 600 * spread(),
                           3000 * spread(), 50 * spread(), 50 * spread()});
    nodes.push_back(std::move(n));
  }
  return nodes;
}

TEST(AcceptBurn, AHealthyJobOf512GpusHasNoFlag) {
  for (unsigned seed = 1; seed <= 10; ++seed) {
    const tp::JobPeerFlags flags = tp::judge_job_peers(healthy_job(seed));
    EXPECT_TRUE(flags.burn.empty()) << seed << ": " << flags.burn[0].second.reason;
    EXPECT_TRUE(flags.copies.empty()) << seed;
    EXPECT_TRUE(flags.hosts.empty()) << seed;
  }
}

TEST(AcceptBurn, ANodeWhoseGpusAllRunAt85PercentIsFlaggedAgainstTheJob) {
  // Its own GPUs agree with each other, so the node alone could not see it: the job's median can.
  std::vector<tp::NodeBurn> nodes = healthy_job(3);
  for (tp::BurnFigures& f : nodes[17].devices) f.gemm_tflops = 510;  // 85% of 600
  const tp::JobPeerFlags flags = tp::judge_job_peers(nodes);
  ASSERT_EQ(flags.burn.size(), 8u);
  EXPECT_TRUE(flags.copies.empty());
  EXPECT_EQ(flags.hosts, std::vector<std::string>{"gpu-node-117"});
  for (const auto& [host, finding] : flags.burn) {
    EXPECT_EQ(host, "gpu-node-117");
    EXPECT_EQ(finding.status, "warn");
    EXPECT_THAT(finding.reason, HasSubstr("of the job's median GPU"));
    EXPECT_THAT(finding.reason, HasSubstr("gpu-node-117: GPU "));
  }
  EXPECT_THAT(flags.burn[0].second.action, HasSubstr("drain the node"));
}

TEST(AcceptBurn, AGpuItsNodeFlaggedIsNotFlaggedTwiceAndTheCpuIsNotCompared) {
  std::vector<tp::NodeBurn> nodes = healthy_job(5);
  // The whole node slow, and GPU 2 the node flagged already for its host-to-device copy.
  for (tp::BurnFigures& f : nodes[4].devices) f.h2d_gbps = 30;
  nodes[4].copy_findings.push_back(
      {"warn", "gpu-node-104: GPU 2 (GPU-34): host-to-device copy 30.0 GB/s, ...", "drain"});
  // A CPU-only host's figures are recorded, never compared with the GPUs'.
  tp::NodeBurn cpu;
  cpu.host = "cpu-node-1";
  cpu.backend = "cpu";
  cpu.devices.push_back({-1, "", "", 0.05, 10, 0, 0});
  nodes.push_back(cpu);
  const tp::JobPeerFlags flags = tp::judge_job_peers(nodes);
  EXPECT_TRUE(flags.burn.empty());
  ASSERT_EQ(flags.copies.size(), 7u) << "GPU 2's own finding stands alone";
  for (const auto& [host, finding] : flags.copies) {
    EXPECT_EQ(host, "gpu-node-104");
    EXPECT_EQ(finding.status, "fail");  // 60%: below 0.8 of the job's median
    EXPECT_THAT(finding.reason, ::testing::Not(HasSubstr("GPU 2 ")));
  }
}

TEST(AcceptBurn, ASecondMeasurementKeepsEachFigureAtItsBetter) {
  std::vector<tp::NodeBurn> nodes = healthy_job(7);
  for (tp::BurnFigures& f : nodes[9].devices) f.gemm_tflops = 480;
  ASSERT_EQ(tp::judge_job_peers(nodes).hosts, std::vector<std::string>{"gpu-node-109"});
  std::vector<tp::NodeBurn> again(1);
  again[0].host = "gpu-node-109";
  for (int gpu = 0; gpu < 8; ++gpu) again[0].devices.push_back({gpu, "", "", 600, 1, 1, 1});
  tp::keep_better(nodes, again);
  EXPECT_DOUBLE_EQ(nodes[9].devices[3].gemm_tflops, 600);
  EXPECT_GT(nodes[9].devices[3].memory_gbps, 1000) << "a lower second figure is not kept";
  EXPECT_TRUE(tp::judge_job_peers(nodes).hosts.empty()) << "caught once: not a flag";
}

TEST(AcceptBurn, ANodeRecordSurvivesTheGatherToRankZero) {
  tp::NodeBurn n = healthy_job(1)[0];
  n.burn_findings.push_back({"fail", "gpu-node-100: GPU 1: the burn failed: x", "reset"});
  nlohmann::json j = n;
  const tp::NodeBurn back = j.get<tp::NodeBurn>();
  EXPECT_EQ(back.host, n.host);
  ASSERT_EQ(back.devices.size(), 8u);
  EXPECT_DOUBLE_EQ(back.devices[5].d2h_gbps, n.devices[5].d2h_gbps);
  ASSERT_EQ(back.burn_findings.size(), 1u);
  EXPECT_EQ(back.burn_findings[0].action, "reset");
}

}  // namespace
