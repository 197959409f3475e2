#pragma once
// What one machine has, read without MPI or a GPU library (docs/node-check.md): the GPUs on its PCI
// bus, its RDMA ports with their state, rate and error counters, its network interfaces, memory,
// CPUs and mounts. Every reader takes the roots of sysfs and procfs, so tests feed it fixture
// trees (tests/unit/test_machine_facts.cpp); a file that is missing leaves its field unknown.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tp {

struct MachineRoots {
  std::string sysfs = "/sys";
  std::string procfs = "/proc";
};

// A PCIe link: what it runs at now, and what it can do.
struct PcieLink {
  int gen = -1, max_gen = -1;  // from "16.0 GT/s PCIe": 4; -1 when not reported
  int width = -1, max_width = -1;
};

// An NVIDIA display or 3D controller (vendor 0x10de, class 0x0300 or 0x0302) on the PCI bus.
struct PciGpu {
  std::string address;  // 0000:9a:00.0
  unsigned device_id = 0;
  std::string driver;  // the bound kernel driver ("nvidia"), "" when none is bound
  int numa_node = -1;
  PcieLink link;
};

// One port of an RDMA device (class/infiniband/DEV/ports/PORT).
struct RdmaPort {
  std::string device, port;  // mlx5_0, 1
  std::string state;         // "ACTIVE" (from "4: ACTIVE")
  std::string phys_state;    // "LinkUp"
  std::string link_layer;    // InfiniBand, Ethernet
  double rate_gbps = -1;     // from "400 Gb/sec (4X NDR)"
  std::string rate_text;
  std::string pci_address;
  int numa_node = -1;
  PcieLink link;
  std::map<std::string, long long> counters;  // the error counters of kRdmaErrorCounters found
};

// The port error counters node-check reads at the start and the end (docs/node-check.md).
extern const char* const kRdmaErrorCounters[6];

struct MountFacts {
  std::string path;
  bool mounted = false;  // a mount point in procfs/self/mountinfo
  double free_gb = -1;   // statvfs f_bavail; -1 when it cannot be read
};

struct MachineFacts {
  std::string host;
  std::string cpu_model;
  int cpus = 0;
  double memory_gb = -1;
  std::vector<PciGpu> pci_gpus;
  std::vector<RdmaPort> rdma_ports;
  std::vector<std::string> interfaces_up;  // loopback aside
};

MachineFacts read_machine_facts(const MachineRoots& roots);
std::vector<PciGpu> read_pci_gpus(const std::string& sysfs_root);
std::vector<RdmaPort> read_rdma_ports(const std::string& sysfs_root);
// Each path's mount and free space; a path under a mount point that is not one itself is not
// mounted (the filesystem the host file expects is missing, and its writes would land on /).
std::vector<MountFacts> read_mounts(const std::string& procfs_root,
                                    const std::vector<std::string>& paths);
// "16.0 GT/s PCIe" -> 4, "2.5 GT/s PCIe" -> 1; -1 for anything else.
int pcie_generation(const std::string& speed);

}  // namespace tp
