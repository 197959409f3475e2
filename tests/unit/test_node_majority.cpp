// Nodes that differ from the majority of their peers (docs/sweep.md, "Topology preflight").
#include <gtest/gtest.h>

#include "fabric/node_majority.h"

namespace {

tp::NodeFacts node(const std::string& speed, const std::string& width = "16") {
  return {{"ens1.speed_mbps", speed}, {"gpu.0000:c1:00.0.width", width}, {"gpus", "8"}};
}

TEST(NodeMajority, TheOneSlowNicIsNamedWithTheMajoritysValue) {
  const std::vector<tp::NodeFacts> nodes = {node("100000"), node("100000"), node("25000"),
                                            node("100000")};
  const auto found = tp::differences_from_majority(nodes);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].node, 2);
  EXPECT_EQ(tp::difference_reason(found[0]),
            "ens1.speed_mbps: 25000, where 3 of 4 nodes have 100000");
}

TEST(NodeMajority, EachDifferenceOfEachNodeIsListedAndAMissingFactCounts) {
  std::vector<tp::NodeFacts> nodes = {node("100000"), node("100000", "8"), node("100000")};
  nodes[0].erase("gpus");  // a node that lost its GPUs' count
  const auto found = tp::differences_from_majority(nodes);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].node, 0);
  EXPECT_EQ(tp::difference_reason(found[0]), "gpus: absent, where 2 of 3 nodes have 8");
  EXPECT_EQ(found[1].node, 1);
  EXPECT_EQ(found[1].key, "gpu.0000:c1:00.0.width");
}

TEST(NodeMajority, WithoutAStrictMajorityNothingIsFlagged) {
  // Two nodes, or an even split: neither outvotes the other.
  EXPECT_TRUE(tp::differences_from_majority({node("100000"), node("25000")}).empty());
  EXPECT_TRUE(
      tp::differences_from_majority({node("100000"), node("25000"), node("100000"), node("25000")})
          .empty());
  EXPECT_TRUE(tp::differences_from_majority({node("100000"), node("100000")}).empty());
  EXPECT_TRUE(tp::differences_from_majority({}).empty());
}

}  // namespace
