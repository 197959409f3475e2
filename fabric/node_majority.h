#pragma once
// Nodes that differ from the majority of their peers (docs/sweep.md, "Topology preflight"): a NIC
// at a lower speed, a PCIe link trained down, fewer GPUs, less memory, another driver. Each node
// reports its facts as key -> value text; a value is judged only where a strict majority of the
// nodes that report the key agree on one value, so two nodes never outvote each other.
#include <map>
#include <string>
#include <vector>

namespace tp {

using NodeFacts = std::map<std::string, std::string>;  // "nic.ens1.speed_mbps" -> "100000"

struct NodeDifference {
  int node = 0;
  std::string key;
  std::string value;     // this node's ("" when it does not report the key)
  std::string majority;  // the value most nodes have
  int agreeing = 0;      // how many nodes have the majority value
  int reporting = 0;     // how many nodes were compared on this key
};

// Every (node, key) whose value differs from a strict majority of the nodes, in node then key
// order. A key most nodes report and one node lacks is a difference too (a missing NIC).
std::vector<NodeDifference> differences_from_majority(const std::vector<NodeFacts>& nodes);

// "ens1 speed_mbps: 25000, where 3 of 4 nodes have 100000"
std::string difference_reason(const NodeDifference& difference);

}  // namespace tp
