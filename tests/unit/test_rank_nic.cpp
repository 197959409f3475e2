// Which NIC a rank's traffic leaves by, from fixture sysfs trees (fabric/rank_nic.h): the
// transport's settings first, then the NICs on the rank's NUMA node, in turn by local rank.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "fabric/rank_nic.h"
#include "fabric/sysfs_topology.h"

namespace {

namespace fs = std::filesystem;

// A node with four RDMA devices, two on each NUMA node.
class RankNic : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("rank_nic_" + std::to_string(getpid()));
    fs::remove_all(root_);
    for (int i = 0; i < 4; ++i) {
      const fs::path device = root_ / "class/infiniband" / ("mlx5_" + std::to_string(i)) / "device";
      fs::create_directories(device);
      std::ofstream(device / "numa_node") << (i < 2 ? 0 : 1) << "\n";
    }
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string root() const { return root_.string(); }

 private:
  fs::path root_;
};

TEST_F(RankNic, TheNicsOnTheRanksNumaNodeInTurn) {
  const tp::TransportSettings none;
  EXPECT_EQ(tp::rank_nic(root(), 0, 1, true, none).name, "mlx5_2");
  EXPECT_EQ(tp::rank_nic(root(), 1, 1, true, none).name, "mlx5_3");
  EXPECT_EQ(tp::rank_nic(root(), 2, 1, true, none).name, "mlx5_2");
  EXPECT_EQ(tp::rank_nic(root(), 1, 0, true, none).source, "NUMA node 0");
  EXPECT_EQ(tp::rank_nic(root(), 1, 0, true, none).numa_node, 0);
  EXPECT_EQ(tp::rank_nic(root(), 1, 1, true, none).numa_node, 1);
  // Unknown NUMA node: every NIC of the node, in turn.
  EXPECT_EQ(tp::rank_nic(root(), 3, -1, true, none).name, "mlx5_3");
  EXPECT_EQ(tp::rank_nic(root(), 3, -1, true, none).source, "the node's NICs");
}

TEST_F(RankNic, TheTransportsSettingsComeFirst) {
  tp::TransportSettings settings;
  settings.nccl_ib_hca = "=mlx5_1:1";
  EXPECT_EQ(tp::rank_nic(root(), 0, 1, true, settings).name, "mlx5_1");
  EXPECT_EQ(tp::rank_nic(root(), 0, 1, true, settings).source, "NCCL_IB_HCA");
  EXPECT_EQ(tp::rank_nic(root(), 0, 1, true, settings).numa_node, 0) << "named, though far";
  // NCCL's setting says nothing of MPI's traffic, and an exclusion list names no NIC.
  EXPECT_EQ(tp::rank_nic(root(), 0, 1, false, settings).name, "mlx5_2");
  settings.nccl_ib_hca = "^mlx5_0";
  EXPECT_EQ(tp::rank_nic(root(), 0, 1, true, settings).name, "mlx5_2");
  settings.ucx_net_devices = "mlx5_0:1,mlx5_3:1";
  EXPECT_EQ(tp::rank_nic(root(), 0, 1, false, settings).name, "mlx5_3") << "the listed one nearest";
  EXPECT_EQ(tp::rank_nic(root(), 0, 1, false, settings).source, "UCX_NET_DEVICES");
}

TEST_F(RankNic, LibfabricsTcpInterfaceNamesMpisNic) {
  tp::TransportSettings settings;
  settings.fi_tcp_iface = "mlx5_3";
  EXPECT_EQ(tp::rank_nic(root(), 0, 1, false, settings).name, "mlx5_3");
  EXPECT_EQ(tp::rank_nic(root(), 0, 1, false, settings).source, "FI_TCP_IFACE");
  EXPECT_EQ(tp::rank_nic(root(), 0, 1, true, settings).source, "NUMA node 1") << "not NCCL's";
}

// Without RDMA devices, a network interface with a device behind it carries the traffic, never a
// virtual one beside it (a tc ifb, a bridge); with only virtual ones (a container), those.
TEST(RankNicWithoutRdma, AnInterfaceWithADeviceBeforeVirtualOnes) {
  const fs::path root = fs::temp_directory_path() / ("rank_nic_net_" + std::to_string(getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "devices/pci0000:00/0000:00:03.0");
  for (const char* name : {"eth0", "ifb0", "ifb1"})
    fs::create_directories(root / "class/net" / name);
  const tp::TransportSettings none;
  EXPECT_EQ(tp::rank_nic(root.string(), 1, -1, false, none).name, "ifb0") << "all virtual";
  fs::create_directory_symlink(root / "devices/pci0000:00/0000:00:03.0",
                               root / "class/net/eth0/device");
  for (int local_rank = 0; local_rank < 3; ++local_rank)
    EXPECT_EQ(tp::rank_nic(root.string(), local_rank, -1, false, none).name, "eth0");
  fs::remove_all(root);
}

TEST(NicsNamedBy, ListsWithoutPortsExclusionsOrRanges) {
  EXPECT_EQ(tp::nics_named_by("mlx5_0:1,mlx5_1:1"), (std::vector<std::string>{"mlx5_0", "mlx5_1"}));
  EXPECT_EQ(tp::nics_named_by("=mlx5_4"), (std::vector<std::string>{"mlx5_4"}));
  EXPECT_TRUE(tp::nics_named_by("^mlx5_0").empty());
  EXPECT_TRUE(tp::nics_named_by("10.0.0.0/8").empty());
  EXPECT_TRUE(tp::nics_named_by("").empty());
}

// sysfs links each NIC to its PCI function: the pass reads the speed of the links its rail ranks
// load, not every NIC's (a NIC left idle may lower its link speed, and is not under test).
TEST(LinksInUse, OnlyTheRailsNicsAndTheGpusWhereTheCollectiveRunsOnThem) {
  const fs::path root = fs::temp_directory_path() / ("links_in_use_" + std::to_string(getpid()));
  fs::remove_all(root);
  const fs::path pci = root / "devices/pci0000:40";
  for (const char* address : {"0000:41:00.0", "0000:42:00.0"})
    fs::create_directories(pci / address);
  fs::create_directories(root / "class/infiniband/mlx5_0");
  fs::create_directories(root / "class/net/eth1");
  fs::create_directory_symlink(pci / "0000:41:00.0", root / "class/infiniband/mlx5_0/device");
  fs::create_directory_symlink(pci / "0000:42:00.0", root / "class/net/eth1/device");
  EXPECT_EQ(tp::nic_pci_address(root.string(), "mlx5_0"), "0000:41:00.0");
  EXPECT_EQ(tp::nic_pci_address(root.string(), "eth1"), "0000:42:00.0");
  EXPECT_EQ(tp::nic_pci_address(root.string(), "mlx5_9"), "");
  EXPECT_EQ(tp::nic_pci_address(root.string(), ""), "");
  fs::remove_all(root);

  std::vector<tp::PcieLinkFacts> links(3);
  links[0] = {"0000:41:00.0", "network", "8.0 GT/s PCIe", "32.0 GT/s PCIe", 16, 16};
  links[1] = {"0000:42:00.0", "network", "8.0 GT/s PCIe", "32.0 GT/s PCIe", 16, 16};
  links[2] = {"0000:c1:00.0", "gpu", "8.0 GT/s PCIe", "32.0 GT/s PCIe", 16, 16};
  const auto addresses = [](const std::vector<tp::PcieLinkFacts>& used) {
    std::vector<std::string> a;
    for (const auto& l : used) a.push_back(l.address);
    return a;
  };
  EXPECT_EQ(addresses(tp::links_in_use(links, {"0000:41:00.0"}, false)),
            (std::vector<std::string>{"0000:41:00.0"}));
  EXPECT_EQ(addresses(tp::links_in_use(links, {"0000:42:00.0"}, true)),
            (std::vector<std::string>{"0000:42:00.0", "0000:c1:00.0"}));
  // No NIC could be named: every NIC's link, rather than none.
  EXPECT_EQ(addresses(tp::links_in_use(links, {}, false)),
            (std::vector<std::string>{"0000:41:00.0", "0000:42:00.0"}));
}

TEST(SlowLinksWhileLoaded, OnlyTheSpeedCountsAndBothValuesAreGiven) {
  std::vector<tp::PcieLinkFacts> links(2);
  links[0] = {"0000:41:00.0", "network", "8.0 GT/s PCIe", "32.0 GT/s PCIe", 16, 16};
  links[1] = {"0000:c1:00.0", "gpu", "32.0 GT/s PCIe", "32.0 GT/s PCIe", 8, 16};
  const auto slow = tp::slow_links_while_loaded(links);
  ASSERT_EQ(slow.size(), 1u) << "a narrow link is the preflight's finding, not this one's";
  EXPECT_EQ(slow[0],
            "0000:41:00.0 (network): PCIe link at 8.0 GT/s PCIe while loaded, capable of "
            "32.0 GT/s PCIe");
}

}  // namespace
