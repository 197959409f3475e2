#include "app/accept/accept_inventory.h"

#include "app/report/gate.h"

namespace tp {
namespace {

using nlohmann::json;

}  // namespace

void to_json(nlohmann::json& j, const NodeInventory& n) {
  nlohmann::json failed = nlohmann::json::array();
  for (const InventoryItem& i : n.failed)
    failed.push_back({i.key, i.expected, i.found, i.reason, i.action});
  j = {{"host", n.host}, {"judged", n.judged}, {"failed", failed}};
}

void from_json(const nlohmann::json& j, NodeInventory& n) {
  n.host = j.at("host").get<std::string>();
  n.judged = j.at("judged").get<int>();
  for (const auto& f : j.at("failed")) n.failed.push_back({f[0], f[1], f[2], "fail", f[3], f[4]});
}

NodeInventory node_inventory(const InventorySpec& spec, const NodeRead& read) {
  NodeInventory mine;
  if (spec.empty() || !read.taken) return mine;
  mine.host = read.machine.host;
  std::vector<std::string> paths;
  for (const MountSpec& m : spec.mounts) paths.push_back(m.path);
  for (InventoryItem& item :
       judge_inventory(spec, read.machine, read_mounts(read.roots.procfs, paths), read.driver)) {
    mine.judged += item.status != "n/a";
    if (item.status == "fail") mine.failed.push_back(std::move(item));
  }
  return mine;
}

InventoryStage judge_node_inventories(const std::vector<NodeInventory>& nodes, bool given,
                                      const std::string& host_file) {
  InventoryStage stage;
  if (!given) {
    stage.check =
        gate_check("inventory", nullptr, nullptr, "n/a",
                   host_file.empty() ? "no --gate.file: no inventory to judge"
                                     : "gate.file '" + host_file + "' has no [inventory]");
    return stage;
  }
  int judged_nodes = 0, failed_nodes = 0;
  std::string first;
  for (const NodeInventory& n : nodes) {
    if (n.host.empty()) continue;  // not a node's first rank
    ++judged_nodes;
    failed_nodes += !n.failed.empty();
    for (const InventoryItem& i : n.failed) {
      if (first.empty()) first = i.reason;
      json finding = node_finding("inventory", i.reason, "fail",
                                  i.key + ": " + i.found + ", expected " + i.expected);
      finding["action"] = i.action;
      stage.findings.emplace_back(n.host, finding);
    }
  }
  const std::string of =
      std::to_string(judged_nodes) + " node(s) against gate.file '" + host_file + "'";
  stage.check = gate_check("inventory", failed_nodes, 0, failed_nodes ? "fail" : "pass",
                           failed_nodes ? std::to_string(failed_nodes) + " of " + of +
                                              " miss their inventory; first: " + first
                                        : "every item of " + of + " met");
  return stage;
}

}  // namespace tp
