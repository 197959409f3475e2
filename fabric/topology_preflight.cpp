#include "fabric/topology_preflight.h"

#include <cmath>

#include "mpi/gather.h"

namespace tp {
namespace {

using nlohmann::json;

json nic_json(const NicFacts& n) {
  return {{"name", n.name}, {"speed_mbps", n.speed_mbps}, {"state", n.state},
          {"mtu", n.mtu},   {"numa_node", n.numa_node},   {"pci_address", n.pci_address}};
}

json link_json(const PcieLinkFacts& l) {
  return {{"address", l.address},
          {"kind", l.kind},
          {"current_speed", l.current_speed},
          {"max_speed", l.max_speed},
          {"current_width", l.current_width},
          {"max_width", l.max_width}};
}

PcieLinkFacts link_from(const json& j) {
  return {j.at("address"),   j.at("kind"),          j.at("current_speed"),
          j.at("max_speed"), j.at("current_width"), j.at("max_width")};
}

}  // namespace

NodeTopology read_node_topology(const std::string& host, const std::string& sysfs_root) {
  NodeTopology node;
  node.host = host;
  node.cpu = read_host_topology();
  node.nics = read_nics(sysfs_root);
  node.ib_ports = read_ib_ports(sysfs_root);
  node.pcie_links = read_pcie_links(sysfs_root);
  return node;
}

json node_topology_json(const NodeTopology& node) {
  json nics = json::array(), ports = json::array(), links = json::array();
  for (const NicFacts& n : node.nics) nics.push_back(nic_json(n));
  for (const IbPortFacts& p : node.ib_ports)
    ports.push_back({{"device", p.device}, {"port", p.port}, {"rate", p.rate}, {"state", p.state}});
  for (const PcieLinkFacts& l : node.pcie_links) links.push_back(link_json(l));
  const HostTopology& c = node.cpu;
  json out = {{"host", node.host},
              {"cpu",
               {{"model", c.cpu_model},
                {"packages", c.packages},
                {"cores", c.cores},
                {"hardware_threads", c.hardware_threads},
                {"numa_nodes", c.numa_nodes},
                {"numa_memory_bytes", c.numa_memory_bytes},
                {"error", c.error}}},
              {"memory_bytes", c.memory_bytes},
              {"nics", nics},
              {"ib_ports", ports},
              {"pcie_links", links},
              {"pcie_speed_compared", false}};
  for (const auto& [key, value] : node.extra.items()) out[key] = value;
  return out;
}

NodeFacts comparable_facts(const NodeTopology& node) {
  NodeFacts facts = node.extra_facts;
  const HostTopology& c = node.cpu;
  if (c.error.empty()) {
    facts["cpu model"] = c.cpu_model;
    facts["cpu packages"] = std::to_string(c.packages);
    facts["cpu cores"] = std::to_string(c.cores);
    facts["hardware threads"] = std::to_string(c.hardware_threads);
    facts["numa nodes"] = std::to_string(c.numa_nodes);
    // The kernel keeps a slightly different share on identical nodes: compare whole GiB.
    facts["memory GiB"] = std::to_string(std::llround(double(c.memory_bytes) / double(1ull << 30)));
  }
  for (const NicFacts& n : node.nics) {
    if (n.pci_address.empty()) continue;  // virtual interfaces differ by design
    facts[n.name + " speed_mbps"] = std::to_string(n.speed_mbps);
    facts[n.name + " state"] = n.state;
    facts[n.name + " mtu"] = std::to_string(n.mtu);
    facts[n.name + " numa_node"] = std::to_string(n.numa_node);
  }
  for (const IbPortFacts& p : node.ib_ports) {
    facts[p.device + "/" + p.port + " rate"] = p.rate;
    facts[p.device + "/" + p.port + " state"] = p.state;
  }
  return facts;
}

TopologyJudgement judge_topology(const std::vector<std::string>& hosts,
                                 const std::vector<NodeFacts>& facts,
                                 const std::vector<std::vector<PcieLinkFacts>>& links) {
  TopologyJudgement j;
  for (const NodeDifference& d : differences_from_majority(facts))
    j.reasons[hosts.at(size_t(d.node))].push_back("topology: " + difference_reason(d));
  for (size_t n = 0; n < links.size(); ++n)
    for (const std::string& link : degraded_links(links[n], false))
      j.reasons[hosts.at(n)].push_back("topology: " + link);
  return j;
}

TopologyPreflight gather_topology(const World& world, const NodeTopology& mine) {
  json mine_json;  // null on every rank but each host's first
  if (world.index_on_host() == 0) {
    json links = json::array();
    for (const PcieLinkFacts& l : mine.pcie_links) links.push_back(link_json(l));
    mine_json = {
        {"node", node_topology_json(mine)}, {"facts", comparable_facts(mine)}, {"links", links}};
  }
  TopologyPreflight out;
  std::vector<std::string> hosts;
  std::vector<NodeFacts> facts;
  std::vector<std::vector<PcieLinkFacts>> links;
  for (const json& j : gather_records_at_root(world, mine_json)) {
    if (j.is_null()) continue;
    out.nodes.push_back(j.at("node"));
    hosts.push_back(j.at("node").at("host"));
    facts.push_back(j.at("facts").get<NodeFacts>());
    links.emplace_back();
    for (const json& l : j.at("links")) links.back().push_back(link_from(l));
  }
  if (world.rank == 0) out.judgement = judge_topology(hosts, facts, links);
  return out;
}

}  // namespace tp
