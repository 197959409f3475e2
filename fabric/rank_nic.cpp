#include "fabric/rank_nic.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fabric/sysfs_topology.h"

namespace tp {
namespace fs = std::filesystem;

namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

long long numa_of_device(const fs::path& device) {
  std::ifstream in(device / "numa_node");
  long long node = -1;
  return in >> node ? node : -1;
}

struct Candidate {
  std::string name;
  long long numa_node = -1;
};

// The node's RDMA devices when it has any (the rails of a GPU node), else its network interfaces.
std::vector<Candidate> node_nics(const std::string& sysfs_root) {
  std::vector<Candidate> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::path(sysfs_root) / "class/infiniband", ec))
    found.push_back({entry.path().filename(), numa_of_device(entry.path() / "device")});
  // A virtual interface (a bridge, a tc ifb, a veth) carries no traffic of its own where a device
  // does; on a host with none but virtual ones (a container's veth) they are all there is.
  if (found.empty()) {
    const std::vector<NicFacts> nics = read_nics(sysfs_root);
    const bool any_device = std::any_of(nics.begin(), nics.end(),
                                        [](const NicFacts& n) { return !n.pci_address.empty(); });
    for (const NicFacts& nic : nics)
      if (!any_device || !nic.pci_address.empty()) found.push_back({nic.name, nic.numa_node});
  }
  std::sort(found.begin(), found.end(),
            [](const Candidate& a, const Candidate& b) { return a.name < b.name; });
  return found;
}

// The `local_rank`-th in turn of those on `numa_node`, or of all when none is there.
std::string in_turn(const std::vector<Candidate>& all, int numa_node, int local_rank) {
  std::vector<std::string> near, every;
  for (const Candidate& c : all) {
    every.push_back(c.name);
    if (numa_node >= 0 && c.numa_node == numa_node) near.push_back(c.name);
  }
  const auto& pool = near.empty() ? every : near;
  return pool.empty() ? "" : pool[size_t(std::max(0, local_rank)) % pool.size()];
}

int numa_of_nic(const std::vector<Candidate>& all, const std::string& name) {
  const auto found =
      std::find_if(all.begin(), all.end(), [&name](const Candidate& c) { return c.name == name; });
  return found == all.end() ? -1 : found->numa_node;
}

int numa_of_cpu(const std::string& sysfs_root, int cpu) {
  std::error_code ec;
  const fs::path folder = fs::path(sysfs_root) / ("devices/system/cpu/cpu" + std::to_string(cpu));
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename();
    if (name.rfind("node", 0) == 0 && name.size() > 4 &&
        name.find_first_not_of("0123456789", 4) == std::string::npos)
      return std::stoi(name.substr(4));
  }
  return -1;
}

}  // namespace

TransportSettings transport_settings_from_environment() {
  return {env("NCCL_IB_HCA"), env("UCX_NET_DEVICES"), env("OMPI_MCA_btl_tcp_if_include"),
          env("OMPI_MCA_btl_openib_if_include"), env("FI_TCP_IFACE")};
}

std::vector<std::string> nics_named_by(const std::string& setting) {
  std::vector<std::string> names;
  if (setting.empty() || setting[0] == '^') return names;
  std::stringstream list(setting[0] == '=' ? setting.substr(1) : setting);
  for (std::string item; std::getline(list, item, ',');) {
    item = item.substr(0, item.find(':'));
    if (!item.empty() && item.find('/') == std::string::npos && item != "all")
      names.push_back(item);
  }
  return names;
}

RankNic rank_nic(const std::string& sysfs_root, int local_rank, int numa_node, bool nccl,
                 const TransportSettings& settings) {
  const std::vector<Candidate> all = node_nics(sysfs_root);
  const std::pair<const char*, const std::string*> named_by[] = {
      {"NCCL_IB_HCA", nccl ? &settings.nccl_ib_hca : nullptr},
      {"UCX_NET_DEVICES", nccl ? nullptr : &settings.ucx_net_devices},
      {"OMPI_MCA_btl_openib_if_include", nccl ? nullptr : &settings.ompi_openib_if_include},
      {"OMPI_MCA_btl_tcp_if_include", nccl ? nullptr : &settings.ompi_tcp_if_include},
      {"FI_TCP_IFACE", nccl ? nullptr : &settings.fi_tcp_iface}};
  for (const auto& [variable, value] : named_by) {
    if (!value) continue;
    std::vector<Candidate> listed;
    for (const std::string& name : nics_named_by(*value)) {
      const auto known = std::find_if(all.begin(), all.end(),
                                      [&name](const Candidate& c) { return c.name == name; });
      listed.push_back(known == all.end() ? Candidate{name, -1} : *known);
    }
    if (!listed.empty()) {
      const std::string chosen = in_turn(listed, numa_node, local_rank);
      return {chosen, variable, numa_of_nic(listed, chosen)};
    }
  }
  const std::string nearest = in_turn(all, numa_node, local_rank);
  if (nearest.empty()) return {};
  const int nic_numa = numa_of_nic(all, nearest);
  const bool near = numa_node >= 0 && nic_numa == numa_node;
  return {nearest, near ? "NUMA node " + std::to_string(numa_node) : "the node's NICs", nic_numa};
}

int numa_node_of_this_process(const std::string& sysfs_root) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
  int node = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    const int here = numa_of_cpu(sysfs_root, cpu);
    if (here < 0 || (node >= 0 && here != node)) return -1;
    node = here;
  }
  return node;
}

std::string nic_pci_address(const std::string& sysfs_root, const std::string& name) {
  if (name.empty()) return "";
  for (const char* folder : {"class/infiniband", "class/net"}) {
    std::error_code ec;
    const fs::path device = fs::canonical(fs::path(sysfs_root) / folder / name / "device", ec);
    // A PCI function's folder (0000:41:00.0); a virtual device links elsewhere.
    const std::string address = ec ? "" : device.filename().string();
    if (address.find(':') != std::string::npos && address.find('.') != std::string::npos)
      return address;
  }
  return "";
}

std::vector<PcieLinkFacts> links_in_use(const std::vector<PcieLinkFacts>& links,
                                        const std::vector<std::string>& nic_addresses,
                                        bool gpus_in_use) {
  std::vector<PcieLinkFacts> used;
  for (const PcieLinkFacts& link : links) {
    const bool named =
        std::find(nic_addresses.begin(), nic_addresses.end(), link.address) != nic_addresses.end();
    if (link.kind == "gpu" ? gpus_in_use : nic_addresses.empty() || named) used.push_back(link);
  }
  return used;
}

}  // namespace tp
