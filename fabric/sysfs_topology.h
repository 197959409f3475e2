#pragma once
// What a node's sysfs says about its fabric (docs/sweep.md, "Topology preflight"): network
// interfaces with their link speed, state, MTU and NUMA node; InfiniBand ports with their rate and
// state; the PCIe links of NICs and GPUs, trained against what they can do. Every reader takes the
// root of the tree (normally "/sys"), so tests feed it fixture trees. A file that is missing or
// unreadable leaves its field unknown (-1 or ""), never an error: sysfs differs by driver.
#include <filesystem>
#include <string>
#include <vector>

namespace tp {

// The first line of a sysfs attribute, trimmed; "" when it cannot be read.
std::string sysfs_attribute(const std::filesystem::path& file);
// An attribute as a number (decimal or 0x hex); -1 when missing or not a whole number.
long long sysfs_number(const std::filesystem::path& file);
// The entries of a folder, sorted by name; none when it cannot be listed.
std::vector<std::filesystem::path> sysfs_entries(const std::filesystem::path& folder);

struct NicFacts {
  std::string name;           // eth0, ib0
  long long speed_mbps = -1;  // class/net/NAME/speed; -1 when down or not reported
  std::string state;          // operstate: up, down, unknown
  long long mtu = -1;
  long long numa_node = -1;  // of the PCI device behind it; -1 when none or not known
  std::string pci_address;   // 0000:41:00.0, "" for a virtual interface
};

struct IbPortFacts {
  std::string device;  // mlx5_0
  std::string port;    // 1
  std::string rate;    // "200 Gb/sec (4X HDR)"
  std::string state;   // "4: ACTIVE"
};

struct PcieLinkFacts {
  std::string address;                   // 0000:41:00.0
  std::string kind;                      // "network" or "gpu" (PCI class 0x02 or 0x03)
  std::string current_speed, max_speed;  // "16.0 GT/s PCIe"
  long long current_width = -1, max_width = -1;
};

// Physical interfaces (those with a device link) and any others except loopback, by name.
std::vector<NicFacts> read_nics(const std::string& sysfs_root);
std::vector<IbPortFacts> read_ib_ports(const std::string& sysfs_root);
// A port's error counters (class/infiniband/DEV/ports/PORT/counters/): -1 when not reported.
struct IbErrorCounters {
  std::string device, port;
  long long symbol_error = -1, link_downed = -1, port_rcv_errors = -1;
};
std::vector<IbErrorCounters> read_ib_error_counters(const std::string& sysfs_root);
// "mlx5_0 port 1: symbol_error grew by 12 (0 -> 12)" for every counter that grew between two
// reads of the same node.
std::vector<std::string> grown_error_counters(const std::vector<IbErrorCounters>& before,
                                              const std::vector<IbErrorCounters>& after);

// The links of network controllers and display (GPU) controllers, by address.
std::vector<PcieLinkFacts> read_pcie_links(const std::string& sysfs_root);

// "0000:41:00.0 (network): PCIe link trained to x8, capable of x16" for every link running below
// its width; with `compare_speed`, also below its speed (devices lower their speed when idle, so
// the speed is compared only while a transfer runs). Empty when every link is as it can be.
std::vector<std::string> degraded_links(const std::vector<PcieLinkFacts>& links,
                                        bool compare_speed);

// "0000:41:00.0 (network): PCIe link at 8.0 GT/s PCIe while loaded, capable of 16.0 GT/s PCIe"
// for every link below its speed: read while a transfer runs, such a link is trained down, not
// resting (the pairwise pass reads it so; docs/sweep.md, "Topology preflight").
std::vector<std::string> slow_links_while_loaded(const std::vector<PcieLinkFacts>& links);

}  // namespace tp
