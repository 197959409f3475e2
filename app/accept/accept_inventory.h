#pragma once
// accept's preflight judges the host file's [inventory] on every node (docs/node-check.md): the
// first rank of each node reads its machine and driver as node-check does, and rank 0 gathers
// one record per rank (the others' empty), so its work and memory grow with the job alone.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/accept/accept_health.h"
#include "node/inventory_judge.h"

namespace tp {

// One node's failed items, as its first rank found them.
struct NodeInventory {
  std::string host;
  int judged = 0;                     // items given and judged (not n/a)
  std::vector<InventoryItem> failed;  // the FAIL items
};

// Every rank: its node's inventory when `read` is its node's (the node's first rank), else an
// empty record.
NodeInventory node_inventory(const InventorySpec& spec, const NodeRead& read);

struct InventoryStage {
  nlohmann::json check;                                          // gate.checks[]: inventory
  std::vector<std::pair<std::string, nlohmann::json>> findings;  // (host, nodes[].findings[] entry)
};

// Pure, on rank 0: the check and each node's findings from every node's record.
InventoryStage judge_node_inventories(const std::vector<NodeInventory>& nodes, bool given,
                                      const std::string& host_file);

}  // namespace tp
