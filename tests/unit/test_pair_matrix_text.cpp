// The pairwise matrix in text (app/report/pair_matrix_text.h): whole up to 16 nodes, the slowest
// pairs above, and host names never cut to where two read the same.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "app/report/pair_matrix_text.h"

namespace {

using nlohmann::json;

std::string host(size_t i) {
  char name[32];
  std::snprintf(name, sizeof name, "cluster-a-node-%03zu", i + 1);
  return name;
}

// n nodes, every pair at 10 GB/s but node 3's row at 1 + j/100.
std::pair<json, json> matrix_of(size_t n) {
  json hosts = json::array(), m = json::array();
  for (size_t i = 0; i < n; ++i) {
    hosts.push_back(host(i));
    json row = json::array();
    for (size_t j = 0; j < n; ++j)
      row.push_back(i == j ? json(nullptr) : json(i == 3 ? 1.0 + double(j) / 100 : 10.0));
    m.push_back(row);
  }
  return {hosts, m};
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(DistinctWidth, CutsOnlyWhereNamesStayApart) {
  EXPECT_EQ(tp::distinct_width({"gpu-node-01", "gpu-node-02"}, 12), 12u) << "short names fit";
  EXPECT_EQ(tp::distinct_width({"cluster-a-node-001", "cluster-a-node-002"}, 12), 18u)
      << "they differ only in the last character";
  EXPECT_EQ(tp::distinct_width({"rack1-long-name", "rack2-long-name"}, 12), 12u);
  EXPECT_EQ(tp::distinct_width({"a", "a"}, 0), 1u) << "the same name twice cannot be helped";
}

TEST(PairMatrixText, SixteenNodesPrintTheWholeMatrixWithDistinctNames) {
  const auto [hosts, m] = matrix_of(16);
  const std::string text = tp::pair_matrix_text(hosts, m, "rail 0, one direction at a time");
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(count(text, host(i)), 2u) << host(i);
  EXPECT_EQ(count(text, "\n"), 19u) << "a blank line, the title, the header, 16 rows";
}

TEST(PairMatrixText, AboveSixteenNodesTheSlowestTenPairsAndTheMedian) {
  const auto [hosts, m] = matrix_of(512);
  const std::string text = tp::pair_matrix_text(hosts, m, "rail 0, one direction at a time");
  EXPECT_NE(text.find("512 nodes (261632 pairs measured): median 10.000 GB/s"), std::string::npos)
      << text;
  EXPECT_EQ(count(text, " -> "), 10u);
  EXPECT_EQ(count(text, "cluster-a-node-004 -> "), 10u) << "node 4's row is the slow one";
  EXPECT_NE(text.find("cluster-a-node-004 -> cluster-a-node-001      1.000 GB/s"),
            std::string::npos)
      << text;
  EXPECT_LT(text.size(), 2000u) << "a few lines, not 262,144 cells";
}

}  // namespace
