#include <gtest/gtest.h>

#include "app/report/rank_gpu.h"

namespace {

tp::RankInfo on_gpu(int rank, const std::string& numa_nodes, int gpu_numa_node) {
  tp::RankInfo r;
  r.rank = rank;
  r.host = "gpu-a";
  r.numa_nodes = numa_nodes;
  r.gpu_uuid = "GPU-" + std::to_string(rank);
  r.gpu_pci_bus_id = "0000:1b:00.0";
  r.gpu_numa_node = gpu_numa_node;
  r.cuda_visible_devices = "0,1";
  return r;
}

TEST(RankGpu, CpuRanksHaveNoGpuRecord) {
  EXPECT_TRUE(tp::rank_gpu_json(tp::RankInfo{}).is_null());
}

TEST(RankGpu, RecordsTheDeviceAndTheVariable) {
  const nlohmann::json gpu = tp::rank_gpu_json(on_gpu(3, "0", 0));
  EXPECT_EQ(gpu["uuid"], "GPU-3");
  EXPECT_EQ(gpu["pci_bus_id"], "0000:1b:00.0");
  EXPECT_EQ(gpu["numa_node"], 0);
  EXPECT_EQ(gpu["cuda_visible_devices"], "0,1");
  tp::RankInfo unset = on_gpu(3, "0", -1);
  unset.cuda_visible_devices.clear();
  EXPECT_TRUE(tp::rank_gpu_json(unset)["numa_node"].is_null());
  EXPECT_TRUE(tp::rank_gpu_json(unset)["cuda_visible_devices"].is_null());
}

TEST(RankGpu, WarnsOnlyForTheRankWhoseGpuIsOnAnotherNumaNode) {
  const std::vector<tp::RankInfo> ranks = {on_gpu(0, "0", 0), on_gpu(1, "0", 1),
                                           on_gpu(2, "0-1", 1), on_gpu(3, "1", -1)};
  const std::vector<std::string> warnings = tp::gpu_numa_warnings(ranks);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("rank 1 on gpu-a drives GPU GPU-1"), std::string::npos);
  EXPECT_NE(warnings[0].find("NUMA node 1, but runs on CPUs of NUMA node(s) 0"), std::string::npos);
}

TEST(RankGpu, UnknownCpuNumaNodesWarnNothing) {
  EXPECT_TRUE(tp::gpu_numa_warnings({on_gpu(0, "", 1), tp::RankInfo{}}).empty());
}

}  // namespace
