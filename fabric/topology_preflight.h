#pragma once
// The topology preflight (docs/sweep.md, "Topology preflight"): each node's first rank reads its
// node (hwloc, sysfs), rank 0 compares the nodes and names each one that differs from the
// majority of its peers or has a PCIe link trained below its width. Checked before anything is
// timed, so nobody tunes a fabric with a bad link in it.
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fabric/host_topology.h"
#include "fabric/node_majority.h"
#include "fabric/sysfs_topology.h"
#include "mpi/world.h"

namespace tp {

// One node as its first rank sees it. `extra` and `extra_facts` are what the caller adds: library
// versions, the driver, GPUs, `nvidia-smi topo -m` (JSON for the report, and the comparable part).
struct NodeTopology {
  std::string host;
  HostTopology cpu;
  std::vector<NicFacts> nics;
  std::vector<IbPortFacts> ib_ports;
  std::vector<PcieLinkFacts> pcie_links;
  nlohmann::json extra = nlohmann::json::object();
  NodeFacts extra_facts;
};

NodeTopology read_node_topology(const std::string& host, const std::string& sysfs_root);

// The node for context.nodes[].
nlohmann::json node_topology_json(const NodeTopology& node);
// What nodes are compared on: CPU model and counts, memory to the nearest GiB, every physical
// NIC's speed, state, MTU and NUMA node, every InfiniBand port's rate and state, and extra_facts.
NodeFacts comparable_facts(const NodeTopology& node);

struct TopologyJudgement {
  std::map<std::string, std::vector<std::string>> reasons;  // host -> why it is flagged
};
// Pure: each node's differences from the majority, and its PCIe links trained below their width
// (read idle, so speeds are not compared).
TopologyJudgement judge_topology(const std::vector<std::string>& hosts,
                                 const std::vector<NodeFacts>& facts,
                                 const std::vector<std::vector<PcieLinkFacts>>& links);

struct TopologyPreflight {
  nlohmann::json nodes = nlohmann::json::array();  // context.nodes[], in world host order
  TopologyJudgement judgement;
  bool measured = true;  // false when preflight.topology=false read nothing
};
// Collective: the first rank of each host sends `mine`; complete on rank 0.
TopologyPreflight gather_topology(const World& world, const NodeTopology& mine);

}  // namespace tp
