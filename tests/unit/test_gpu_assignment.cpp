// The GPU each local rank drives, on fake 8-GPU nodes (gpu/gpu_assignment.h): two sockets of 32
// CPUs, GPUs 0-3 attached to socket 0 and 4-7 to socket 1.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu/gpu_assignment.h"

namespace {

std::vector<int> cpus(int first, int count) {
  std::vector<int> list;
  for (int c = first; c < first + count; ++c) list.push_back(c);
  return list;
}
std::vector<int> socket(int s) {
  return cpus(32 * s, 32);
}
std::string uuid(int gpu) {
  return "GPU-" + std::to_string(gpu);
}

// A rank that sees `gpus` (in this order), running on `affinity`.
tp::RankGpuView view(const std::vector<int>& gpus, const std::vector<int>& affinity) {
  tp::RankGpuView v;
  for (int g : gpus) {
    v.uuids.push_back(uuid(g));
    v.gpu_cpus.push_back(socket(g / 4));
  }
  v.affinity = affinity;
  return v;
}

// The UUID each rank ends up on.
std::vector<std::string> chosen(const std::vector<tp::RankGpuView>& ranks) {
  std::vector<std::string> out;
  const auto choices = tp::assign_gpus(ranks);
  for (size_t r = 0; r < ranks.size(); ++r)
    out.push_back(ranks[r].uuids.at(size_t(choices[r].visible_index)));
  return out;
}

const std::vector<int> kAll = {0, 1, 2, 3, 4, 5, 6, 7};

TEST(GpuAssignment, AllVisibleBlockPlacementGivesEachRankItsOwnLocalGpu) {
  std::vector<tp::RankGpuView> ranks;
  for (int r = 0; r < 8; ++r) ranks.push_back(view(kAll, cpus(8 * r, 8)));  // 0-3 on socket 0
  EXPECT_EQ(chosen(ranks), (std::vector<std::string>{uuid(0), uuid(1), uuid(2), uuid(3), uuid(4),
                                                     uuid(5), uuid(6), uuid(7)}));
  for (const auto& c : tp::assign_gpus(ranks)) EXPECT_TRUE(c.cpu_local);
}

TEST(GpuAssignment, AllVisibleSocketCyclicPlacementFollowsTheCpus) {
  std::vector<tp::RankGpuView> ranks;
  for (int r = 0; r < 8; ++r) ranks.push_back(view(kAll, socket(r % 2)));
  EXPECT_EQ(chosen(ranks), (std::vector<std::string>{uuid(0), uuid(4), uuid(1), uuid(5), uuid(2),
                                                     uuid(6), uuid(3), uuid(7)}));
}

TEST(GpuAssignment, OneGpuPerTaskUsesTheOneItSees) {
  std::vector<tp::RankGpuView> ranks;
  for (int r = 0; r < 8; ++r) ranks.push_back(view({r}, cpus(8 * r, 8)));
  const auto choices = tp::assign_gpus(ranks);
  for (size_t r = 0; r < ranks.size(); ++r) {
    EXPECT_EQ(choices[r].visible_index, 0);
    EXPECT_TRUE(choices[r].cpu_local);
  }
}

TEST(GpuAssignment, GpuBindClosestWithSocketCyclicRanksUsesEveryGpuOnce) {
  // Each rank sees its socket's 4 GPUs; the modulo rule sent local ranks 0 and 4 to one GPU.
  std::vector<tp::RankGpuView> ranks;
  for (int r = 0; r < 8; ++r) {
    const int s = r % 2;
    ranks.push_back(view({4 * s, 4 * s + 1, 4 * s + 2, 4 * s + 3}, socket(s)));
  }
  const auto used = chosen(ranks);
  EXPECT_EQ(used, (std::vector<std::string>{uuid(0), uuid(4), uuid(1), uuid(5), uuid(2), uuid(6),
                                            uuid(3), uuid(7)}));
}

TEST(GpuAssignment, SixteenRanksShareEightGpusTwoEach) {
  std::vector<tp::RankGpuView> ranks;
  for (int r = 0; r < 16; ++r) ranks.push_back(view(kAll, cpus(4 * r, 4)));
  const auto used = chosen(ranks);
  for (int g = 0; g < 8; ++g)
    EXPECT_EQ(std::count(used.begin(), used.end(), uuid(g)), 2) << uuid(g);
}

TEST(GpuAssignment, ARankOnCpusNoGpuIsAttachedToStillGetsOneAndSaysSo) {
  std::vector<tp::RankGpuView> ranks = {view({0, 1}, socket(0)), view({0, 1}, cpus(200, 4))};
  const auto choices = tp::assign_gpus(ranks);
  EXPECT_EQ(choices[0].visible_index, 0);
  EXPECT_TRUE(choices[0].cpu_local);
  EXPECT_EQ(choices[1].visible_index, 1);
  EXPECT_FALSE(choices[1].cpu_local);
}

TEST(GpuAssignment, TheSameGpusListedInAnotherOrderAreOneGroup) {
  // CUDA_VISIBLE_DEVICES set per task in different orders: the claims follow the UUIDs.
  std::vector<tp::RankGpuView> ranks = {view({0, 1}, socket(0)), view({1, 0}, socket(0))};
  EXPECT_EQ(chosen(ranks), (std::vector<std::string>{uuid(0), uuid(1)}));
}

TEST(GpuAssignment, ARankThatSeesNoGpuGetsNone) {
  tp::RankGpuView none;
  none.affinity = socket(0);
  EXPECT_EQ(tp::assign_gpus({none})[0].visible_index, -1);
}

}  // namespace
