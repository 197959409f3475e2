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

TEST(RankGpu, NamesOnlyTheRankWhoseGpuIsOnAnotherNumaNodeThanItsCpus) {
  const std::vector<tp::RankInfo> ranks = {on_gpu(0, "0", 0), on_gpu(1, "0", 1),
                                           on_gpu(2, "0-1", 1), on_gpu(3, "1", -1)};
  const auto reasons = tp::affinity_reasons(ranks);
  ASSERT_EQ(reasons.size(), 1u);
  ASSERT_EQ(reasons.at("gpu-a").size(), 1u);
  const std::string& why = reasons.at("gpu-a")[0];
  EXPECT_NE(why.find("rank 1 drives GPU GPU-1"), std::string::npos) << why;
  EXPECT_NE(why.find("NUMA node 1, but runs on CPUs of NUMA node(s) 0"), std::string::npos);
}

TEST(RankGpu, UnknownNumaNodesNameNothing) {
  tp::RankInfo far_nic = on_gpu(1, "", 1);
  far_nic.nic = "mlx5_0";
  far_nic.nic_numa_node = -1;
  EXPECT_TRUE(tp::affinity_reasons({on_gpu(0, "", 1), tp::RankInfo{}, far_nic}).empty());
}

TEST(RankGpu, ARankWhoseNicIsOnAnotherNumaNodeThanItsGpuIsNamed) {
  tp::RankInfo near = on_gpu(0, "1", 1), far = on_gpu(1, "1", 1);
  near.nic = "mlx5_2";
  near.nic_source = "NUMA node 1";
  near.nic_numa_node = 1;
  far.nic = "mlx5_0";
  far.nic_source = "NCCL_IB_HCA";
  far.nic_numa_node = 0;
  const auto reasons = tp::affinity_reasons({near, far});
  ASSERT_EQ(reasons.at("gpu-a").size(), 1u);
  EXPECT_NE(reasons.at("gpu-a")[0].find("rank 1 drives GPU GPU-1 (PCI 0000:1b:00.0) on NUMA node "
                                        "1, but its NIC mlx5_0 (NCCL_IB_HCA) is on NUMA node 0"),
            std::string::npos)
      << reasons.at("gpu-a")[0];
  EXPECT_EQ(tp::rank_nic_json(far)["numa_node"], 0);
  EXPECT_TRUE(tp::rank_nic_json(tp::RankInfo{}).is_null());
}

}  // namespace
