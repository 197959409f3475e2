#include "node/machine_facts.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/sysinfo.h"
#include "fabric/sysfs_topology.h"

namespace tp {
namespace {

namespace fs = std::filesystem;

std::string attribute(const fs::path& file) {
  return sysfs_attribute(file);
}

long long number(const fs::path& file, long long unknown = -1) {
  const long long value = sysfs_number(file);
  return value < 0 ? unknown : value;
}

// "4: ACTIVE" -> "ACTIVE"; "5: LinkUp" -> "LinkUp".
std::string after_colon(const std::string& text) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) return text;
  const size_t first = text.find_first_not_of(' ', colon + 1);
  return first == std::string::npos ? "" : text.substr(first);
}

PcieLink link_of(const fs::path& device) {
  PcieLink link;
  link.gen = pcie_generation(attribute(device / "current_link_speed"));
  link.max_gen = pcie_generation(attribute(device / "max_link_speed"));
  link.width = int(number(device / "current_link_width"));
  link.max_width = int(number(device / "max_link_width"));
  return link;
}

// The name of the folder a link points to: the bound driver, or a PCI address.
std::string link_target(const fs::path& link) {
  std::error_code ec;
  const fs::path target = fs::read_symlink(link, ec);
  return ec ? "" : target.filename().string();
}

// Mount points from mountinfo's fifth field, octal escapes (\040 for a space) undone.
std::vector<std::string> mount_points(const std::string& procfs_root) {
  std::vector<std::string> points;
  std::ifstream in(fs::path(procfs_root) / "self" / "mountinfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, device, root, point;
    if (!(fields >> id >> parent >> device >> root >> point)) continue;
    std::string decoded;
    for (size_t i = 0; i < point.size(); ++i)
      if (point[i] == '\\' && i + 3 < point.size()) {
        decoded += char(std::strtol(point.substr(i + 1, 3).c_str(), nullptr, 8));
        i += 3;
      } else {
        decoded += point[i];
      }
    points.push_back(decoded);
  }
  return points;
}

}  // namespace

const char* const kRdmaErrorCounters[6] = {"symbol_error",
                                           "link_downed",
                                           "port_rcv_errors",
                                           "port_xmit_discards",
                                           "local_link_integrity_errors",
                                           "excessive_buffer_overrun_errors"};

int pcie_generation(const std::string& speed) {
  char* end = nullptr;
  const double rate = std::strtod(speed.c_str(), &end);
  if (end == speed.c_str()) return -1;
  const std::pair<double, int> gens[] = {{2.5, 1}, {5, 2},  {8, 3},  {16, 4},
                                         {32, 5},  {64, 6}, {128, 7}};
  for (const auto& [gt, gen] : gens)
    if (rate > gt * 0.9 && rate < gt * 1.1) return gen;
  return -1;
}

std::vector<PciGpu> read_pci_gpus(const std::string& sysfs_root) {
  std::vector<PciGpu> gpus;
  for (const fs::path& device : sysfs_entries(fs::path(sysfs_root) / "bus" / "pci" / "devices")) {
    const long long pci_class = number(device / "class");
    const bool gpu_class = (pci_class >> 8) == 0x0300 || (pci_class >> 8) == 0x0302;
    if (number(device / "vendor") != 0x10de || !gpu_class) continue;
    PciGpu gpu;
    gpu.address = device.filename().string();
    gpu.device_id = unsigned(number(device / "device", 0));
    gpu.driver = link_target(device / "driver");
    gpu.numa_node = int(number(device / "numa_node"));
    gpu.link = link_of(device);
    gpus.push_back(gpu);
  }
  return gpus;
}

std::vector<RdmaPort> read_rdma_ports(const std::string& sysfs_root) {
  std::vector<RdmaPort> ports;
  for (const fs::path& device : sysfs_entries(fs::path(sysfs_root) / "class" / "infiniband")) {
    std::error_code ec;
    const fs::path pci = fs::canonical(device / "device", ec);
    for (const fs::path& dir : sysfs_entries(device / "ports")) {
      RdmaPort port;
      port.device = device.filename().string();
      port.port = dir.filename().string();
      port.state = after_colon(attribute(dir / "state"));
      port.phys_state = after_colon(attribute(dir / "phys_state"));
      port.link_layer = attribute(dir / "link_layer");
      port.rate_text = attribute(dir / "rate");
      char* end = nullptr;
      const double rate = std::strtod(port.rate_text.c_str(), &end);
      if (end != port.rate_text.c_str()) port.rate_gbps = rate;
      if (!ec) {
        port.pci_address = pci.filename().string();
        port.numa_node = int(number(pci / "numa_node"));
        port.link = link_of(pci);
      }
      for (const char* name : kRdmaErrorCounters)
        if (const long long value = number(dir / "counters" / name); value >= 0)
          port.counters[name] = value;
      ports.push_back(port);
    }
  }
  return ports;
}

std::vector<MountFacts> read_mounts(const std::string& procfs_root,
                                    const std::vector<std::string>& paths) {
  const std::vector<std::string> points = mount_points(procfs_root);
  std::vector<MountFacts> out;
  for (const std::string& path : paths) {
    MountFacts m;
    m.path = path;
    const std::string plain =
        path.size() > 1 && path.back() == '/' ? path.substr(0, path.size() - 1) : path;
    m.mounted = std::find(points.begin(), points.end(), plain) != points.end();
    struct statvfs s {};
    if (m.mounted && ::statvfs(plain.c_str(), &s) == 0)
      m.free_gb = double(s.f_bavail) * double(s.f_frsize) / 1e9;
    out.push_back(m);
  }
  return out;
}

MachineFacts read_machine_facts(const MachineRoots& roots) {
  MachineFacts facts;
  facts.host = host_name();
  facts.cpu_model = cpu_model();
  facts.cpus = int(online_cpus());
  if (const auto bytes = meminfo_bytes("MemTotal")) facts.memory_gb = double(*bytes) / 1e9;
  facts.pci_gpus = read_pci_gpus(roots.sysfs);
  facts.rdma_ports = read_rdma_ports(roots.sysfs);
  for (const NicFacts& nic : read_nics(roots.sysfs))
    if (nic.state == "up") facts.interfaces_up.push_back(nic.name);
  return facts;
}

}  // namespace tp
