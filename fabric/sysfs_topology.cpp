#include "fabric/sysfs_topology.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace tp {
namespace {

namespace fs = std::filesystem;

std::string pci_kind(const fs::path& device) {
  const long long pci_class = sysfs_number(device / "class");
  if (pci_class < 0) return "";
  switch (pci_class >> 16) {
    case 0x02:
      return "network";
    case 0x03:
      return "gpu";
    default:
      return "";
  }
}

// "16.0 GT/s PCIe" as 16.0; -1 for "Unknown" or "".
double transfer_rate(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  return end == text.c_str() ? -1 : value;
}

}  // namespace

// The first line of a sysfs attribute, trimmed; "" when it cannot be read.
std::string sysfs_attribute(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ' || line.back() == '\r'))
    line.pop_back();
  return line;
}

long long sysfs_number(const fs::path& file) {
  const std::string text = sysfs_attribute(file);
  try {
    size_t used = 0;
    const long long value = std::stoll(text, &used, 0);
    return used == text.size() ? value : -1;
  } catch (const std::exception&) {
    return -1;
  }
}

// The entries of a folder, sorted by name; none when it cannot be listed.
std::vector<fs::path> sysfs_entries(const fs::path& folder) {
  std::vector<fs::path> found;
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec))
    found.push_back(it->path());
  std::sort(found.begin(), found.end());
  return found;
}

std::vector<NicFacts> read_nics(const std::string& sysfs_root) {
  std::vector<NicFacts> nics;
  for (const fs::path& dir : sysfs_entries(fs::path(sysfs_root) / "class" / "net")) {
    NicFacts nic;
    nic.name = dir.filename().string();
    if (nic.name == "lo") continue;
    nic.state = sysfs_attribute(dir / "operstate");
    nic.mtu = sysfs_number(dir / "mtu");
    nic.speed_mbps = sysfs_number(dir / "speed");
    if (nic.speed_mbps <= 0) nic.speed_mbps = -1;  // -1 or 0: down, or a virtual interface
    std::error_code ec;
    const fs::path device = fs::canonical(dir / "device", ec);
    if (!ec) {
      nic.pci_address = device.filename().string();
      nic.numa_node = sysfs_number(device / "numa_node");
    }
    nics.push_back(nic);
  }
  return nics;
}

std::vector<IbPortFacts> read_ib_ports(const std::string& sysfs_root) {
  std::vector<IbPortFacts> ports;
  for (const fs::path& device : sysfs_entries(fs::path(sysfs_root) / "class" / "infiniband"))
    for (const fs::path& port : sysfs_entries(device / "ports"))
      ports.push_back({device.filename().string(), port.filename().string(),
                       sysfs_attribute(port / "rate"), sysfs_attribute(port / "state")});
  return ports;
}

std::vector<IbErrorCounters> read_ib_error_counters(const std::string& sysfs_root) {
  std::vector<IbErrorCounters> ports;
  for (const fs::path& device : sysfs_entries(fs::path(sysfs_root) / "class" / "infiniband"))
    for (const fs::path& port : sysfs_entries(device / "ports")) {
      const fs::path counters = port / "counters";
      ports.push_back({device.filename().string(), port.filename().string(),
                       sysfs_number(counters / "symbol_error"),
                       sysfs_number(counters / "link_downed"),
                       sysfs_number(counters / "port_rcv_errors")});
    }
  return ports;
}

std::vector<std::string> grown_error_counters(const std::vector<IbErrorCounters>& before,
                                              const std::vector<IbErrorCounters>& after) {
  std::vector<std::string> grown;
  for (const IbErrorCounters& now : after)
    for (const IbErrorCounters& then : before) {
      if (then.device != now.device || then.port != now.port) continue;
      const std::pair<const char*, std::pair<long long, long long>> counters[] = {
          {"symbol_error", {then.symbol_error, now.symbol_error}},
          {"link_downed", {then.link_downed, now.link_downed}},
          {"port_rcv_errors", {then.port_rcv_errors, now.port_rcv_errors}}};
      for (const auto& [name, values] : counters)
        if (values.first >= 0 && values.second > values.first)
          grown.push_back(now.device + " port " + now.port + ": " + name + " grew by " +
                          std::to_string(values.second - values.first) + " (" +
                          std::to_string(values.first) + " -> " + std::to_string(values.second) +
                          ") during the pairwise pass");
    }
  return grown;
}

std::vector<PcieLinkFacts> read_pcie_links(const std::string& sysfs_root) {
  std::vector<PcieLinkFacts> links;
  for (const fs::path& device : sysfs_entries(fs::path(sysfs_root) / "bus" / "pci" / "devices")) {
    const std::string kind = pci_kind(device);
    if (kind.empty()) continue;
    PcieLinkFacts link;
    link.address = device.filename().string();
    link.kind = kind;
    link.current_speed = sysfs_attribute(device / "current_link_speed");
    link.max_speed = sysfs_attribute(device / "max_link_speed");
    link.current_width = sysfs_number(device / "current_link_width");
    link.max_width = sysfs_number(device / "max_link_width");
    links.push_back(link);
  }
  return links;
}

std::vector<std::string> degraded_links(const std::vector<PcieLinkFacts>& links,
                                        bool compare_speed) {
  std::vector<std::string> found;
  for (const PcieLinkFacts& link : links) {
    const bool narrow =
        link.current_width > 0 && link.max_width > 0 && link.current_width < link.max_width;
    const double current = transfer_rate(link.current_speed), max = transfer_rate(link.max_speed);
    const bool slow = compare_speed && current > 0 && max > 0 && current < max;
    if (!narrow && !slow) continue;
    const std::string width = std::to_string(link.current_width);
    const std::string max_width = std::to_string(link.max_width);
    std::string what = link.address;
    what.append(" (").append(link.kind).append("): PCIe link trained to ");
    if (narrow)
      what.append("x").append(width).append(", capable of x").append(max_width);
    else
      what.append(link.current_speed).append(", capable of ").append(link.max_speed);
    if (narrow && slow)
      what.append("; speed ").append(link.current_speed).append(" of ").append(link.max_speed);
    found.push_back(what);
  }
  return found;
}

std::vector<std::string> slow_links_while_loaded(const std::vector<PcieLinkFacts>& links) {
  std::vector<std::string> found;
  for (const PcieLinkFacts& link : links) {
    const double current = transfer_rate(link.current_speed), max = transfer_rate(link.max_speed);
    if (current > 0 && max > 0 && current < max)
      found.push_back(link.address + " (" + link.kind + "): PCIe link at " + link.current_speed +
                      " while loaded, capable of " + link.max_speed);
  }
  return found;
}

}  // namespace tp
