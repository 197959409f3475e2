// The topology readers on fixture sysfs trees (docs/sweep.md, "Topology preflight"): a node with
// one NIC at a lower speed, one PCIe link trained down, and the files drivers leave out.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "fabric/sysfs_topology.h"

namespace {

namespace fs = std::filesystem;

class SysfsTopology : public ::testing::Test {
 protected:
  void SetUp() override {
    root =
        fs::path(::testing::TempDir()) /
        ("sysfs-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root);
  }
  void TearDown() override { fs::remove_all(root); }

  void write(const fs::path& file, const std::string& text) {
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text << "\n";
  }
  // A PCI device of `pci_class` with its link, and a network interface on it when `nic` is set.
  void pci_device(const std::string& address, const std::string& pci_class,
                  const std::string& speed, const std::string& max_speed, int width, int max_width,
                  const std::string& nic = "", int nic_speed = 0) {
    const fs::path device = root / "devices" / "pci0000:00" / address;
    write(device / "class", pci_class);
    write(device / "current_link_speed", speed);
    write(device / "max_link_speed", max_speed);
    write(device / "current_link_width", std::to_string(width));
    write(device / "max_link_width", std::to_string(max_width));
    write(device / "numa_node", "1");
    fs::create_directories(root / "bus" / "pci" / "devices");
    fs::create_directory_symlink(device, root / "bus" / "pci" / "devices" / address);
    if (nic.empty()) return;
    const fs::path net = root / "class" / "net" / nic;
    write(net / "speed", std::to_string(nic_speed));
    write(net / "operstate", "up");
    write(net / "mtu", "9000");
    fs::create_directory_symlink(device, net / "device");
  }

  fs::path root;
};

TEST_F(SysfsTopology, NicsCarryTheirSpeedStateMtuAndNumaNode) {
  pci_device("0000:41:00.0", "0x020000", "16.0 GT/s PCIe", "16.0 GT/s PCIe", 16, 16, "ens1",
             100000);
  pci_device("0000:42:00.0", "0x020000", "16.0 GT/s PCIe", "16.0 GT/s PCIe", 16, 16, "ens2", 25000);
  write(root / "class" / "net" / "lo" / "mtu", "65536");
  write(root / "class" / "net" / "veth0" / "speed", "-1");  // virtual: no device, no speed
  const std::vector<tp::NicFacts> nics = tp::read_nics(root.string());
  ASSERT_EQ(nics.size(), 3u) << "loopback is left out";
  EXPECT_EQ(nics[0].name, "ens1");
  EXPECT_EQ(nics[0].speed_mbps, 100000);
  EXPECT_EQ(nics[0].state, "up");
  EXPECT_EQ(nics[0].mtu, 9000);
  EXPECT_EQ(nics[0].numa_node, 1);
  EXPECT_EQ(nics[0].pci_address, "0000:41:00.0");
  EXPECT_EQ(nics[1].speed_mbps, 25000) << "the slow NIC is read as it is";
  EXPECT_EQ(nics[2].name, "veth0");
  EXPECT_EQ(nics[2].speed_mbps, -1);
  EXPECT_EQ(nics[2].pci_address, "");
  EXPECT_EQ(nics[2].state, "") << "a missing file is unknown, not an error";
}

TEST_F(SysfsTopology, ExactlyTheDowngradedLinkIsNamed) {
  pci_device("0000:41:00.0", "0x020000", "16.0 GT/s PCIe", "16.0 GT/s PCIe", 16, 16, "ens1",
             100000);
  pci_device("0000:c1:00.0", "0x030200", "8.0 GT/s PCIe", "32.0 GT/s PCIe", 8, 16);   // a GPU
  pci_device("0000:c2:00.0", "0x030200", "2.5 GT/s PCIe", "32.0 GT/s PCIe", 16, 16);  // idle
  pci_device("0000:00:1f.0", "0x060100", "Unknown", "Unknown", 0, 0);  // a bridge: not read
  const std::vector<tp::PcieLinkFacts> links = tp::read_pcie_links(root.string());
  ASSERT_EQ(links.size(), 3u);
  EXPECT_EQ(links[1].kind, "gpu");
  const std::vector<std::string> idle = tp::degraded_links(links, false);
  ASSERT_EQ(idle.size(), 1u) << "idle: widths only";
  EXPECT_EQ(idle[0], "0000:c1:00.0 (gpu): PCIe link trained to x8, capable of x16");
  const std::vector<std::string> busy = tp::degraded_links(links, true);
  ASSERT_EQ(busy.size(), 2u) << "during a transfer: speeds as well";
  EXPECT_EQ(busy[0],
            "0000:c1:00.0 (gpu): PCIe link trained to x8, capable of x16; speed 8.0 GT/s PCIe "
            "of 32.0 GT/s PCIe");
  EXPECT_EQ(busy[1],
            "0000:c2:00.0 (gpu): PCIe link trained to 2.5 GT/s PCIe, capable of 32.0 GT/s PCIe");
}

TEST_F(SysfsTopology, InfinibandPortsCarryTheirRateAndState) {
  write(root / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "rate", "200 Gb/sec (4X HDR)");
  write(root / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "state", "4: ACTIVE");
  write(root / "class" / "infiniband" / "mlx5_1" / "ports" / "1" / "rate", "100 Gb/sec (4X EDR)");
  write(root / "class" / "infiniband" / "mlx5_1" / "ports" / "1" / "state", "1: DOWN");
  const std::vector<tp::IbPortFacts> ports = tp::read_ib_ports(root.string());
  ASSERT_EQ(ports.size(), 2u);
  EXPECT_EQ(ports[0].device, "mlx5_0");
  EXPECT_EQ(ports[0].rate, "200 Gb/sec (4X HDR)");
  EXPECT_EQ(ports[1].state, "1: DOWN");
}

TEST_F(SysfsTopology, AMissingTreeReadsAsNothing) {
  EXPECT_TRUE(tp::read_nics(root.string()).empty());
  EXPECT_TRUE(tp::read_ib_ports(root.string()).empty());
  EXPECT_TRUE(tp::read_pcie_links(root.string()).empty());
}

TEST_F(SysfsTopology, IbErrorCountersThatGrowAreNamedWithTheirPort) {
  const fs::path port = root / "class" / "infiniband" / "mlx5_0" / "ports" / "1";
  write(port / "rate", "200 Gb/sec (4X HDR)");
  write(port / "counters" / "symbol_error", "3");
  write(port / "counters" / "link_downed", "0");
  // port_rcv_errors left out: a driver that does not report it is not an error
  const auto before = tp::read_ib_error_counters(root.string());
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(before[0].symbol_error, 3);
  EXPECT_EQ(before[0].port_rcv_errors, -1);
  EXPECT_TRUE(tp::grown_error_counters(before, before).empty());
  write(port / "counters" / "symbol_error", "15");
  const auto grown = tp::grown_error_counters(before, tp::read_ib_error_counters(root.string()));
  ASSERT_EQ(grown.size(), 1u);
  EXPECT_EQ(grown[0], "mlx5_0 port 1: symbol_error grew by 12 (3 -> 15) during the pairwise pass");
}

}  // namespace
