// The topology preflight's judgement across nodes, and hwloc's view of this machine.
#include <gtest/gtest.h>

#include "fabric/topology_preflight.h"

namespace {

tp::NodeTopology node(const std::string& host, long long nic_speed, long long link_width) {
  tp::NodeTopology n;
  n.host = host;
  n.cpu.cpu_model = "Example CPU";
  n.cpu.cores = 64;
  n.cpu.hardware_threads = 128;
  n.cpu.numa_nodes = 2;
  n.cpu.packages = 2;
  n.cpu.memory_bytes = (512ull << 30) - (host == "n2" ? (200ull << 20) : 0);  // kernel share
  n.nics = {{"ens1", nic_speed, "up", 9000, 1, "0000:41:00.0"},
            {"veth9" + host, -1, "up", 1500, -1, ""}};
  n.pcie_links = {{"0000:41:00.0", "network", "32.0 GT/s PCIe", "32.0 GT/s PCIe", link_width, 16}};
  n.extra_facts = {{"MPI library", "Open MPI v4.1.4"}};
  return n;
}

tp::TopologyJudgement judge(const std::vector<tp::NodeTopology>& nodes) {
  std::vector<std::string> hosts;
  std::vector<tp::NodeFacts> facts;
  std::vector<std::vector<tp::PcieLinkFacts>> links;
  for (const auto& n : nodes) {
    hosts.push_back(n.host);
    facts.push_back(tp::comparable_facts(n));
    links.push_back(n.pcie_links);
  }
  return tp::judge_topology(hosts, facts, links);
}

TEST(TopologyPreflight, IdenticalNodesAreNotFlagged) {
  // Memory 200 MiB apart and virtual interfaces of other names are not differences.
  EXPECT_TRUE(judge({node("n1", 100000, 16), node("n2", 100000, 16), node("n3", 100000, 16)})
                  .reasons.empty());
}

TEST(TopologyPreflight, ASlowNicAndADowngradedLinkNameExactlyTheirNodes) {
  const auto j = judge({node("n1", 100000, 16), node("n2", 25000, 16), node("n3", 100000, 8),
                        node("n4", 100000, 16)});
  ASSERT_EQ(j.reasons.size(), 2u);
  ASSERT_EQ(j.reasons.at("n2").size(), 1u);
  EXPECT_EQ(j.reasons.at("n2")[0],
            "topology: ens1 speed_mbps: 25000, where 3 of 4 nodes have 100000");
  ASSERT_EQ(j.reasons.at("n3").size(), 1u);
  EXPECT_NE(j.reasons.at("n3")[0].find("0000:41:00.0"), std::string::npos);
  EXPECT_NE(j.reasons.at("n3")[0].find("x8"), std::string::npos);
}

TEST(TopologyPreflight, AnotherLibraryVersionIsADifference) {
  auto odd = node("n3", 100000, 16);
  odd.extra_facts["MPI library"] = "Open MPI v5.0.3";
  const auto j = judge({node("n1", 100000, 16), node("n2", 100000, 16), odd});
  ASSERT_EQ(j.reasons.size(), 1u);
  EXPECT_NE(j.reasons.at("n3")[0].find("v5.0.3"), std::string::npos);
}

// The GPU stack is compared the same way: a node on another driver is named with both values.
TEST(TopologyPreflight, AnotherDriverIsADifference) {
  std::vector<tp::NodeTopology> nodes;
  for (const char* host : {"n1", "n2", "n3"}) {
    nodes.push_back(node(host, 100000, 16));
    nodes.back().extra_facts["driver"] = host == std::string("n2") ? "570.86.15" : "580.65.06";
    nodes.back().extra_facts["NCCL"] = "2.28.9";
  }
  const auto j = judge(nodes);
  ASSERT_EQ(j.reasons.size(), 1u);
  EXPECT_NE(j.reasons.at("n2")[0].find("570.86.15"), std::string::npos) << j.reasons.at("n2")[0];
  EXPECT_NE(j.reasons.at("n2")[0].find("580.65.06"), std::string::npos) << j.reasons.at("n2")[0];
}

TEST(TopologyPreflight, TheNodeJsonCarriesItsFactsAndTheCallersExtras) {
  auto n = node("n1", 100000, 16);
  n.extra["versions"] = {{"mpi", "Open MPI v4.1.4"}};
  const auto j = tp::node_topology_json(n);
  EXPECT_EQ(j["host"], "n1");
  EXPECT_EQ(j["cpu"]["cores"], 64);
  EXPECT_EQ(j["nics"].size(), 2u);
  EXPECT_EQ(j["pcie_links"][0]["max_width"], 16);
  EXPECT_EQ(j["versions"]["mpi"], "Open MPI v4.1.4");
  EXPECT_EQ(j["pcie_speed_compared"], false);
}

TEST(HostTopology, HwlocSeesThisMachine) {
  const tp::HostTopology host = tp::read_host_topology();
  ASSERT_EQ(host.error, "");
  EXPECT_GT(host.cores, 0);
  EXPECT_GE(host.hardware_threads, host.cores);
  EXPECT_GT(host.numa_nodes, 0);
  EXPECT_GT(host.memory_bytes, 0u);
}

TEST(HostTopology, AnUnreadableExportIsAnErrorNotACrash) {
  const tp::HostTopology host = tp::read_host_topology("/nonexistent/topology.xml");
  EXPECT_NE(host.error, "");
  EXPECT_EQ(host.cores, 0);
}

}  // namespace
