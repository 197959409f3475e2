#include "app/stages/pair_matrix_json.h"

#include <algorithm>

namespace tp {
namespace {

using nlohmann::json;

json median_or_null(std::vector<double>& values) {
  if (values.empty()) return nullptr;
  const auto middle = values.begin() + long(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

}  // namespace

json report_matrix(const PairMatrix& m) {
  if (m.size() > kNodesInReportMatrix) return nullptr;
  json rows = json::array();
  for (const auto& row : m) {
    json cells = json::array();
    for (double v : row) cells.push_back(v < 0 ? json(nullptr) : json(v));
    rows.push_back(std::move(cells));
  }
  return rows;
}

json matrix_summary(const PairMatrix& m, const std::vector<std::string>& hosts) {
  struct Pair {
    double gbps;
    size_t from, to;
  };
  std::vector<Pair> pairs;
  std::vector<double> all;
  json nodes = json::array();
  for (size_t i = 0; i < m.size(); ++i) {
    std::vector<double> sends, receives;
    for (size_t j = 0; j < m.size(); ++j) {
      if (i == j) continue;
      if (j < m[i].size() && m[i][j] >= 0) {
        sends.push_back(m[i][j]);
        pairs.push_back({m[i][j], i, j});
        all.push_back(m[i][j]);
      }
      if (i < m[j].size() && m[j][i] >= 0) receives.push_back(m[j][i]);
    }
    nodes.push_back({{"host", i < hosts.size() ? json(hosts[i]) : json()},
                     {"send_median_gbps", median_or_null(sends)},
                     {"receive_median_gbps", median_or_null(receives)}});
  }
  const size_t kept = std::min(kSlowestPairsKept, pairs.size());
  std::partial_sort(pairs.begin(), pairs.begin() + long(kept), pairs.end(),
                    [](const Pair& a, const Pair& b) { return a.gbps < b.gbps; });
  json slowest = json::array();
  for (size_t k = 0; k < kept; ++k)
    slowest.push_back({{"from", hosts.at(pairs[k].from)},
                       {"to", hosts.at(pairs[k].to)},
                       {"gbps", pairs[k].gbps}});
  const size_t measured = all.size();
  return {{"median_gbps", median_or_null(all)},
          {"pairs", measured},
          {"slowest", std::move(slowest)},
          {"nodes", std::move(nodes)}};
}

}  // namespace tp
