#include "fabric/node_majority.h"

#include <algorithm>
#include <set>

namespace tp {

std::vector<NodeDifference> differences_from_majority(const std::vector<NodeFacts>& nodes) {
  std::set<std::string> keys;
  for (const NodeFacts& facts : nodes)
    for (const auto& [key, value] : facts) keys.insert(key);
  std::vector<NodeDifference> found;
  const int n = int(nodes.size());
  for (const std::string& key : keys) {
    // Every node takes part: one that lacks the key counts as the value "".
    std::map<std::string, int> votes;
    for (const NodeFacts& facts : nodes) {
      const auto it = facts.find(key);
      ++votes[it == facts.end() ? "" : it->second];
    }
    std::string majority;
    int agreeing = 0;
    for (const auto& [value, count] : votes)
      if (count > agreeing) {
        majority = value;
        agreeing = count;
      }
    if (2 * agreeing <= n) continue;  // no strict majority: nothing to judge against
    for (int node = 0; node < n; ++node) {
      const auto it = nodes[size_t(node)].find(key);
      const std::string value = it == nodes[size_t(node)].end() ? "" : it->second;
      if (value != majority) found.push_back({node, key, value, majority, agreeing, n});
    }
  }
  std::stable_sort(
      found.begin(), found.end(),
      [](const NodeDifference& a, const NodeDifference& b) { return a.node < b.node; });
  return found;
}

std::string difference_reason(const NodeDifference& d) {
  std::string text = d.key;
  text.append(": ")
      .append(d.value.empty() ? "absent" : d.value)
      .append(", where ")
      .append(std::to_string(d.agreeing))
      .append(" of ")
      .append(std::to_string(d.reporting))
      .append(" nodes have ")
      .append(d.majority.empty() ? "none" : d.majority);
  return text;
}

}  // namespace tp
