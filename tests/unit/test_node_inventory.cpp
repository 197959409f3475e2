// A host type's [inventory] (docs/node-check.md): how its keys are read, what the machine readers
// find in a fixture sysfs tree, each mismatch named with its GPU or port, and every shipped host
// file held together: a machine built from its own inventory passes it, one lacking a GPU, a NIC
// or memory fails it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "app/cli/host_reference.h"
#include "app/node_check_report.h"
#include "common/errors.h"
#include "node/gpu_health.h"
#include "node/inventory_judge.h"
#include "node/inventory_spec.h"
#include "node/machine_facts.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

tp::InventorySpec spec_of(const std::string& text) {
  tp::HostReference reference;
  tp::InventoryLines lines;
  tp::split_host_sections("h.ini", text, reference, lines);
  return tp::parse_inventory("h.ini", lines);
}

std::string usage_error_of(const std::string& text) {
  try {
    spec_of(text);
  } catch (const tp::UsageError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(InventorySpec, ReadsEveryKindOfKey) {
  const tp::InventorySpec s = spec_of(
      "[gate]\nmin_au = 0.5\n[inventory]\n# H200\ngpus = 8\ngpu_device_id = 0x2335\n"
      "min_driver_version = 550.54\necc = on\nmig = off\nnics = 8\nmin_nic_rate_gbps = 400\n"
      "mounts = /lustre:100, /scratch\n");
  EXPECT_EQ(s.gpus, 8);
  EXPECT_EQ(s.gpu_device_id, 0x2335u);
  EXPECT_EQ(s.min_driver_version, "550.54");
  EXPECT_EQ(s.ecc, true);
  EXPECT_EQ(s.mig, false);
  EXPECT_EQ(s.nic_link_layer, "InfiniBand");  // nics counts InfiniBand ports unless told
  ASSERT_EQ(s.mounts.size(), 2u);
  EXPECT_EQ(s.mounts[0].path, "/lustre");
  EXPECT_EQ(s.mounts[0].min_free_gb, 100);
  EXPECT_EQ(s.mounts[1].min_free_gb, 0);
  EXPECT_TRUE(spec_of("[gate]\nmin_au = 0.5\n").empty());
}

TEST(InventorySpec, ABadKeyOrValueNamesTheFileLineKeyAndValue) {
  EXPECT_THAT(usage_error_of("[inventory]\n\ngpu = 8\n"),
              HasSubstr("gate.file 'h.ini', line 3: unknown inventory key 'gpu' (known: gpus,"));
  EXPECT_THAT(usage_error_of("[inventory]\ngpus = eight\n"),
              HasSubstr("line 2: gpus = 'eight' is not a whole number from 0 to 64"));
  EXPECT_THAT(usage_error_of("[inventory]\ngpus = 65\n"), HasSubstr("gpus = '65'"));
  EXPECT_THAT(usage_error_of("[inventory]\necc = maybe\n"), HasSubstr("is not true or false"));
  EXPECT_THAT(usage_error_of("[inventory]\nmin_driver_version = 550.x\n"),
              HasSubstr("is not a dotted version"));
  EXPECT_THAT(usage_error_of("[inventory]\nnic_link_layer = Omni-Path\n"),
              HasSubstr("is not InfiniBand or Ethernet"));
  EXPECT_THAT(usage_error_of("[inventory]\nmounts = scratch:10\n"),
              HasSubstr("PATH[:MIN_FREE_GB] with PATH from /"));
  EXPECT_THAT(usage_error_of("[inventory]\nmounts = /a/../etc\n"), HasSubstr("no '..'"));
  EXPECT_THAT(usage_error_of("[inventory]\nmounts = /a:-1\n"), HasSubstr("a number from 0"));
  EXPECT_THAT(usage_error_of("[inventory]\ngpus = 8\ngpus = 7\n"),
              HasSubstr("line 3: inventory key gpus given twice"));
  EXPECT_THAT(usage_error_of("[inventory]\ngpus\n"), HasSubstr("is not NAME = VALUE"));
}

TEST(InventorySpec, VersionsCompareFieldByField) {
  EXPECT_EQ(tp::compare_versions("550.54.15", "550.54"), 1);
  EXPECT_EQ(tp::compare_versions("550.54", "550.54.0"), 0);
  EXPECT_EQ(tp::compare_versions("535.161.08", "550.54"), -1);
  EXPECT_EQ(tp::compare_versions("12.10", "12.4"), 1);  // numbers, not text
  EXPECT_FALSE(tp::compare_versions("12.", "12"));
  EXPECT_FALSE(tp::compare_versions("r550", "550"));
}

// A sysfs tree of one node: GPUs on the PCI bus and InfiniBand ports behind NICs.
class SysfsTree {
 public:
  explicit SysfsTree(const std::string& name) : root_(fs::path(::testing::TempDir()) / name) {
    fs::remove_all(root_);
  }
  ~SysfsTree() { fs::remove_all(root_); }
  std::string root() const { return root_.string(); }

  void gpu(const std::string& address, const std::string& device_id = "0x2335") {
    const fs::path d = pci(address, "0x030200", "16.0 GT/s PCIe", "32.0 GT/s PCIe", "16", "16");
    write(d / "vendor", "0x10de");
    write(d / "device", device_id);
  }
  void port(const std::string& device, const std::string& address, const std::string& rate,
            const std::string& state = "4: ACTIVE", const std::string& width = "16") {
    pci(address, "0x020700", "32.0 GT/s PCIe", "32.0 GT/s PCIe", width, "16");
    const fs::path dev = root_ / "class" / "infiniband" / device;
    fs::create_directories(dev / "ports" / "1" / "counters");
    fs::create_symlink(root_ / "bus" / "pci" / "devices" / address, dev / "device");
    write(dev / "ports" / "1" / "rate", rate);
    write(dev / "ports" / "1" / "state", state);
    write(dev / "ports" / "1" / "phys_state", state == "4: ACTIVE" ? "5: LinkUp" : "3: Disabled");
    write(dev / "ports" / "1" / "link_layer", "InfiniBand");
    write(dev / "ports" / "1" / "counters" / "symbol_error", "3");
  }

 private:
  fs::path pci(const std::string& address, const std::string& pci_class, const std::string& speed,
               const std::string& max_speed, const std::string& width,
               const std::string& max_width) {
    const fs::path d = root_ / "bus" / "pci" / "devices" / address;
    fs::create_directories(d);
    write(d / "class", pci_class);
    write(d / "current_link_speed", speed);
    write(d / "max_link_speed", max_speed);
    write(d / "current_link_width", width);
    write(d / "max_link_width", max_width);
    write(d / "numa_node", "1");
    return d;
  }
  static void write(const fs::path& file, const std::string& text) {
    std::ofstream(file) << text << "\n";
  }
  fs::path root_;
};

std::string gpu_address(int i) {
  char text[32];
  std::snprintf(text, sizeof text, "0000:%02x:00.0", 0x18 + 0x10 * i);
  return text;
}

// The driver's view of the GPUs a fixture tree holds, as NVML would give it on a healthy node.
tp::DriverView driver_of(const std::vector<tp::PciGpu>& gpus) {
  tp::DriverView d;
  d.loaded = true;
  d.driver_version = "550.90.07";
  d.cuda_driver_version = "12.4";
  d.nccl_version = "2.28.9";
  for (size_t i = 0; i < gpus.size(); ++i) {
    tp::DriverGpu g;
    g.index = int(i);
    g.name = "NVIDIA H200";
    g.uuid = "GPU-" + std::to_string(1000 + i);
    g.pci_address = gpus[i].address;
    g.device_id = gpus[i].device_id;
    g.memory_gb = 150.7;
    g.vbios = "96.00.99.00.01";
    g.ecc = g.ecc_pending = 1;
    g.mig = g.mig_pending = 0;
    g.persistence = 1;
    g.nvlinks_up = 18;
    g.max_pcie_gen = 5;
    g.max_pcie_width = 16;
    d.gpus.push_back(g);
  }
  return d;
}

std::vector<tp::InventoryItem> failures(const std::vector<tp::InventoryItem>& items) {
  std::vector<tp::InventoryItem> out;
  for (const tp::InventoryItem& i : items)
    if (i.status == "fail") out.push_back(i);
  return out;
}

const char* const kEightByEight =
    "[inventory]\ngpus = 8\ngpu_name = H200\ngpu_device_id = 0x2335\nmin_gpu_memory_gb = 140\n"
    "nvlinks_per_gpu = 18\necc = on\nmig = off\npersistence = on\nmin_driver_version = 550.54\n"
    "nics = 8\nmin_nic_rate_gbps = 400\nib_ports_active = true\nnic_pcie_gen = 5\n"
    "nic_pcie_width = 16\n";

struct Node {
  tp::MachineFacts machine;
  tp::DriverView driver;
};

Node eight_by_eight(SysfsTree& tree, int slow_port = -1, int narrow_port = -1) {
  for (int i = 0; i < 8; ++i) {
    tree.gpu(gpu_address(i));
    char nic[32];
    std::snprintf(nic, sizeof nic, "0000:%02x:00.0", 0x1a + 0x10 * i);
    tree.port("mlx5_" + std::to_string(i), nic,
              i == slow_port ? "200 Gb/sec (4X HDR)" : "400 Gb/sec (4X NDR)", "4: ACTIVE",
              i == narrow_port ? "8" : "16");
  }
  Node n;
  n.machine.host = "gpu-node-07";
  n.machine.pci_gpus = tp::read_pci_gpus(tree.root());
  n.machine.rdma_ports = tp::read_rdma_ports(tree.root());
  n.driver = driver_of(n.machine.pci_gpus);
  return n;
}

TEST(MachineFacts, ReadsGpusOnTheBusAndPortsWithTheirLinksAndCounters) {
  SysfsTree tree("machine_facts");
  const Node n = eight_by_eight(tree);
  ASSERT_EQ(n.machine.pci_gpus.size(), 8u);
  EXPECT_EQ(n.machine.pci_gpus[0].address, "0000:18:00.0");
  EXPECT_EQ(n.machine.pci_gpus[0].device_id, 0x2335u);
  EXPECT_EQ(n.machine.pci_gpus[0].link.gen, 4);
  EXPECT_EQ(n.machine.pci_gpus[0].link.max_gen, 5);
  ASSERT_EQ(n.machine.rdma_ports.size(), 8u);
  const tp::RdmaPort& p = n.machine.rdma_ports[0];
  EXPECT_EQ(p.device, "mlx5_0");
  EXPECT_EQ(p.state, "ACTIVE");
  EXPECT_EQ(p.phys_state, "LinkUp");
  EXPECT_EQ(p.rate_gbps, 400);
  EXPECT_EQ(p.pci_address, "0000:1a:00.0");
  EXPECT_EQ(p.link.max_width, 16);
  EXPECT_EQ(p.counters.at("symbol_error"), 3);
  EXPECT_EQ(p.counters.count("link_downed"), 0u);  // not in the tree: not reported
  EXPECT_EQ(tp::pcie_generation("2.5 GT/s PCIe"), 1);
  EXPECT_EQ(tp::pcie_generation("Unknown"), -1);
}

TEST(InventoryJudge, AHealthyEightByEightNodePassesEveryItem) {
  SysfsTree tree("healthy_node");
  const Node n = eight_by_eight(tree);
  const auto items = tp::judge_inventory(spec_of(kEightByEight), n.machine, {}, n.driver);
  EXPECT_TRUE(failures(items).empty()) << failures(items).front().reason;
  for (const tp::InventoryItem& i : items) EXPECT_EQ(i.status, "pass") << i.key << ": " << i.found;
}

TEST(InventoryJudge, AGpuOnTheBusButNotByTheDriverIsNamedWithItsAddress) {
  SysfsTree tree("missing_gpu");
  Node n = eight_by_eight(tree);
  n.driver.gpus.erase(n.driver.gpus.begin() + 3);  // 0000:48:00.0 fell off the driver
  const auto failed =
      failures(tp::judge_inventory(spec_of(kEightByEight), n.machine, {}, n.driver));
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].key, "gpus");
  EXPECT_EQ(failed[0].reason,
            "gpu-node-07: 7 GPUs, expected 8 (missing 0000:48:00.0, seen on the PCI bus but not by "
            "the driver)");
  EXPECT_THAT(failed[0].action, HasSubstr("XID 79"));
}

TEST(InventoryJudge, AGpuGoneFromTheBusAsksForAReseat) {
  SysfsTree tree("gone_gpu");
  Node n = eight_by_eight(tree);
  n.machine.pci_gpus.pop_back();
  n.driver.gpus.pop_back();
  const auto failed =
      failures(tp::judge_inventory(spec_of(kEightByEight), n.machine, {}, n.driver));
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].reason, "gpu-node-07: 7 GPUs, expected 8 (7 on the PCI bus)");
  EXPECT_THAT(failed[0].action, HasSubstr("reseat or replace"));
}

TEST(InventoryJudge, WithoutTheDriverTheCountRestsOnTheBusAndTheRestIsNotJudged) {
  tp::MachineFacts machine;
  machine.host = "vm";
  tp::DriverView driver;
  driver.unavailable = "libnvidia-ml.so.1: cannot open shared object file";
  const auto items = tp::judge_inventory(spec_of(kEightByEight), machine, {}, driver);
  const auto failed = failures(items);
  ASSERT_EQ(failed.size(), 2u);
  EXPECT_EQ(failed[0].reason,
            "vm: 0 GPUs, expected 8 (none on the PCI bus; the driver could not be asked: "
            "libnvidia-ml.so.1: cannot open shared object file)");
  EXPECT_EQ(failed[1].reason, "vm: 0 InfiniBand port(s), expected 8 (none in class/infiniband)");
  int not_judged = 0;
  for (const tp::InventoryItem& i : items) not_judged += i.status == "n/a";
  EXPECT_GE(not_judged, 8);  // every GPU property, and every per-port rule with no port
}

TEST(InventoryJudge, ASlowPortAndANarrowNicAreEachNamed) {
  SysfsTree tree("slow_port");
  const Node n = eight_by_eight(tree, 3, 5);
  const auto failed =
      failures(tp::judge_inventory(spec_of(kEightByEight), n.machine, {}, n.driver));
  ASSERT_EQ(failed.size(), 2u);
  EXPECT_EQ(failed[0].key, "min_nic_rate_gbps");
  EXPECT_EQ(failed[0].reason,
            "gpu-node-07: mlx5_3 port 1 at 200 Gb/sec (4X HDR); expected 400 Gb/s");
  EXPECT_EQ(failed[1].key, "nic_pcie_gen, nic_pcie_width");
  EXPECT_EQ(failed[1].reason,
            "gpu-node-07: mlx5_5 port 1 (0000:6a:00.0) at Gen5 x8, capable of Gen5 x16; "
            "expected Gen5 x16");
}

TEST(InventoryJudge, APortDownAndGpuSettingsAreNamedPerGpu) {
  SysfsTree tree("port_down");
  for (int i = 0; i < 2; ++i) tree.gpu(gpu_address(i));
  tree.port("mlx5_0", "0000:1a:00.0", "400 Gb/sec (4X NDR)");
  tree.port("mlx5_1", "0000:2a:00.0", "400 Gb/sec (4X NDR)", "1: DOWN");
  tp::MachineFacts machine;
  machine.host = "gpu-node-07";
  machine.pci_gpus = tp::read_pci_gpus(tree.root());
  machine.rdma_ports = tp::read_rdma_ports(tree.root());
  tp::DriverView driver = driver_of(machine.pci_gpus);
  driver.gpus[1].ecc_pending = 0;
  driver.gpus[0].vbios = "96.00.99.00.02";
  const auto failed = failures(tp::judge_inventory(
      spec_of("[inventory]\nib_ports_active = true\necc = on\nsame_gpu_firmware = true\n"), machine,
      {}, driver));
  ASSERT_EQ(failed.size(), 3u);
  EXPECT_EQ(failed[0].reason,
            "gpu-node-07: GPU 1 (GPU-1001, 0000:28:00.0) turns off at the next reset; expected on");
  EXPECT_THAT(failed[1].reason, HasSubstr("GPU 0 (GPU-1000, 0000:18:00.0) VBIOS 96.00.99.00.02"));
  EXPECT_EQ(failed[2].reason,
            "gpu-node-07: mlx5_1 port 1 is DOWN, Disabled; expected ACTIVE, LinkUp");
}

TEST(InventoryJudge, HostMemoryCpusVersionsAndMounts) {
  tp::MachineFacts machine;
  machine.host = "cpu-07";
  machine.cpus = 2;
  machine.memory_gb = 25.3;
  machine.cpu_model = "AMD EPYC 9654";
  tp::DriverView driver;
  driver.loaded = true;
  driver.driver_version = "535.161.08";
  const std::vector<tp::MountFacts> mounts = {{"/lustre", false, -1}, {"/scratch", true, 3.2}};
  const auto failed = failures(tp::judge_inventory(
      spec_of("[inventory]\nmin_cpus = 4\nmin_host_memory_gb = 32\ncpu_model = epyc\n"
              "min_driver_version = 550.54\nmounts = /lustre, /scratch:10\n"),
      machine, mounts, driver));
  ASSERT_EQ(failed.size(), 5u);
  EXPECT_EQ(failed[0].reason, "cpu-07: min_driver_version 535.161.08, expected at least 550.54");
  EXPECT_EQ(failed[1].reason, "cpu-07: host memory 25.3 GB, expected at least 32.0 GB");
  EXPECT_EQ(failed[2].reason, "cpu-07: 2 online CPUs, expected at least 4");
  EXPECT_THAT(failed[3].reason, HasSubstr("/lustre is not a mount point"));
  EXPECT_EQ(failed[4].reason, "cpu-07: /scratch has 3.20 GB free, expected at least 10.0 GB");
}

TEST(InventoryJudge, MountPointsComeFromMountinfoWithTheirEscapesUndone) {
  const fs::path proc = fs::path(::testing::TempDir()) / "fake_proc";
  fs::create_directories(proc / "self");
  std::ofstream(proc / "self" / "mountinfo")
      << "22 1 0:21 / / rw - ext4 /dev/vda rw\n"
      << "40 22 0:40 / /mnt/check\\040points rw - lustre 10.0.0.1@o2ib:/fs rw\n";
  const auto found = tp::read_mounts(proc.string(), {"/", "/mnt/check points", "/lustre"});
  EXPECT_TRUE(found[0].mounted);
  EXPECT_GT(found[0].free_gb, 0);
  EXPECT_TRUE(found[1].mounted);
  EXPECT_FALSE(found[2].mounted);
  fs::remove_all(proc);
}

TEST(NodeCheckReport, EndsInNhcsFormAndItsFindingsAreTheNodes) {
  tp::NodeCheckRecord r;
  r.run_id = "nc-1";
  r.machine.host = "gpu-node-07";
  r.host_file = "h200.ini";
  r.inventory = {
      {"gpus", "8", "7", "fail", "gpu-node-07: 7 GPUs, expected 8 (7 on the PCI bus)", "reseat"},
      {"min_cpus", "2", "224", "pass", "", ""}};
  const nlohmann::json report = tp::node_check_report(r);
  EXPECT_EQ(report["verdict"], "FAIL");
  EXPECT_EQ(report["nodes"][0]["findings"][0]["check"], "inventory");
  EXPECT_EQ(report["nodes"][0]["findings"][0]["summary"], "gpus: 7, expected 8");
  EXPECT_THAT(tp::node_check_text(report),
              HasSubstr("gpu-node-07 | ERROR: trainproof: inventory: 7 GPUs, expected 8 (7 on the "
                        "PCI bus)\n"));
  r.inventory.erase(r.inventory.begin());
  const nlohmann::json healthy = tp::node_check_report(r);
  EXPECT_EQ(healthy["verdict"], "PASS");
  EXPECT_EQ(tp::node_check_text(healthy), "gpu-node-07 | Healthy\n");
}

TEST(GpuHealth, DcgmsQuickRulesEachNameTheirGpuAndAtRestNothingElseIsJudged) {
  tp::DriverView d = driver_of(
      {{"0000:18:00.0", 0x2335, "nvidia", 0, {}}, {"0000:28:00.0", 0x2335, "nvidia", 0, {}}});
  tp::GpuHealth& h = d.gpus[1].health;
  // At rest, with lifetime counts below DCGM's limits and SW power cap set: no finding.
  h.clock_event_reasons = tp::kClocksSwPowerCap | 0x1;  // and GPU idle
  h.retired_sbe = 31;
  h.retired_dbe = 31;
  h.remapped_uncorrectable = 511;
  h.ecc_uncorrected_aggregate = 5;  // lifetime: a past error, already repaired
  h.ecc_corrected_volatile = 1000;
  h.temperature_c = 90;
  EXPECT_TRUE(tp::judge_gpu_health("n1", d).empty());
  h.retired_dbe = 32;  // 63 pages: DCGM's limit
  h.remapped_uncorrectable = 512;
  h.clock_event_reasons = tp::kClocksHwThermal | tp::kClocksHwPowerBrake;
  const auto found = tp::judge_gpu_health("n1", d);
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0].reason,
            "n1: GPU 1 (GPU-1001, 0000:28:00.0): 512 rows remapped for uncorrectable errors "
            "(limit 512)");
  EXPECT_EQ(found[1].reason, "n1: GPU 1 (GPU-1001, 0000:28:00.0): 63 pages retired (limit 63)");
  EXPECT_EQ(found[2].reason,
            "n1: GPU 1 (GPU-1001, 0000:28:00.0): clocks held down by HW thermal slowdown, HW "
            "power brake");
  for (const auto& f : found) EXPECT_EQ(f.status, "fail");
  EXPECT_THAT(found[0].action, HasSubstr("replace the GPU"));
}

// A machine built from a host file's own inventory: its figures exactly, every port active.
Node machine_from(const tp::InventorySpec& s) {
  Node n;
  n.machine.host = "node-01";
  n.machine.cpus = s.min_cpus.value_or(1);
  n.machine.memory_gb = s.min_host_memory_gb.value_or(1);
  n.machine.cpu_model = s.cpu_model.empty() ? "any" : s.cpu_model;
  for (int i = 0; i < s.min_network_interfaces.value_or(1); ++i)
    n.machine.interfaces_up.push_back("eth" + std::to_string(i));
  for (int i = 0; i < s.gpus.value_or(0); ++i)
    n.machine.pci_gpus.push_back(
        {gpu_address(i), s.gpu_device_id.value_or(0x2335), "nvidia", 0, {}});
  for (int i = 0; i < s.nics.value_or(0); ++i) {
    tp::RdmaPort p;
    p.device = "mlx5_" + std::to_string(i);
    p.port = "1";
    p.state = "ACTIVE";
    p.phys_state = "LinkUp";
    p.link_layer = s.nic_link_layer;
    p.rate_gbps = s.min_nic_rate_gbps.value_or(100);
    p.link = {s.nic_pcie_gen.value_or(4), s.nic_pcie_gen.value_or(4), s.nic_pcie_width.value_or(16),
              s.nic_pcie_width.value_or(16)};
    n.machine.rdma_ports.push_back(p);
  }
  n.driver = driver_of(n.machine.pci_gpus);
  if (!s.min_driver_version.empty()) n.driver.driver_version = s.min_driver_version;
  if (!s.min_cuda_driver_version.empty()) n.driver.cuda_driver_version = s.min_cuda_driver_version;
  if (!s.min_nccl_version.empty()) n.driver.nccl_version = s.min_nccl_version;
  for (tp::DriverGpu& g : n.driver.gpus) {
    g.name = "NVIDIA " + (s.gpu_name.empty() ? std::string("GPU") : s.gpu_name);
    g.memory_gb = s.min_gpu_memory_gb.value_or(16);
    g.nvlinks_up = s.nvlinks_per_gpu.value_or(0);
    g.max_pcie_gen = s.gpu_pcie_gen.value_or(4);
    g.max_pcie_width = s.gpu_pcie_width.value_or(16);
  }
  return n;
}

std::string host_file_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ShippedHostFiles, EachInventoryHoldsForItsOwnMachineAndFailsALesserOne) {
  int files = 0;
  for (const auto& entry : fs::directory_iterator(std::string(TRAINPROOF_SCENARIOS) + "/hosts")) {
    if (entry.path().extension() != ".ini") continue;
    ++files;
    const std::string path = entry.path().string();
    tp::HostReference reference;
    tp::InventoryLines lines;
    tp::split_host_sections(path, host_file_text(path), reference, lines);
    const tp::InventorySpec spec = tp::parse_inventory(path, lines);
    ASSERT_FALSE(spec.empty()) << path << " states no [inventory]";
    if (reference.count("gpus_per_node")) {
      EXPECT_EQ(spec.gpus, int(reference.at("gpus_per_node"))) << path;
    }
    if (spec.gpus == 0) {  // a CPU host file: minimums only, so it holds on any host of its kind
      EXPECT_TRUE(spec.cpu_model.empty() && spec.mounts.empty()) << path;
      EXPECT_TRUE(spec.driver_version.empty()) << path;
    }
    const Node healthy = machine_from(spec);
    for (const tp::InventoryItem& i :
         tp::judge_inventory(spec, healthy.machine, {}, healthy.driver))
      EXPECT_NE(i.status, "fail") << path << ": " << i.reason;
    Node lesser = machine_from(spec);
    lesser.machine.memory_gb /= 2;
    if (!lesser.machine.pci_gpus.empty()) lesser.driver.gpus.pop_back();
    if (!lesser.machine.rdma_ports.empty()) lesser.machine.rdma_ports.back().rate_gbps /= 2;
    const auto failed = failures(tp::judge_inventory(spec, lesser.machine, {}, lesser.driver));
    EXPECT_GE(failed.size(),
              1u + !healthy.machine.pci_gpus.empty() + !healthy.machine.rdma_ports.empty())
        << path;
  }
  EXPECT_GE(files, 3);
}

}  // namespace
