// The nodes to act on (app/report/node_actions.h): Slurm's compressed host list, NHC-style drain
// reasons and the formats of `trainproof report nodes`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "app/report/node_actions.h"
#include "common/errors.h"

namespace {

using nlohmann::json;
using ::testing::HasSubstr;

json report_with(const std::vector<std::pair<std::string, std::vector<std::string>>>& flagged,
                 const std::vector<std::string>& healthy = {}) {
  json report = {{"nodes", json::array()}};
  for (const auto& [host, reasons] : flagged)
    report["nodes"].push_back({{"host", host}, {"flagged", true}, {"reasons", reasons}});
  for (const std::string& host : healthy)
    report["nodes"].push_back({{"host", host}, {"flagged", false}, {"reasons", json::array()}});
  return report;
}

TEST(SlurmHostlist, FoldsNumberedNamesIntoRanges) {
  EXPECT_EQ(tp::slurm_hostlist({"gpu-node-07", "gpu-node-01", "gpu-node-02", "gpu-node-03"}),
            "gpu-node-[01-03,07]");
  EXPECT_EQ(tp::slurm_hostlist({"vc-n3"}), "vc-n3");
  EXPECT_EQ(tp::slurm_hostlist({"vc-n1", "vc-n3", "vc-n2"}), "vc-n[1-3]");
  // Another width or prefix is another group; a name without a number stays as it is.
  EXPECT_EQ(tp::slurm_hostlist({"node9", "node10", "node11", "login", "a01", "a02"}),
            "a[01-02],login,node[10-11],node9");
  EXPECT_EQ(tp::slurm_hostlist({"n1", "n1"}), "n1");
}

TEST(SlurmHostlist, FourThousandNodesFoldIntoOneRange) {
  std::vector<std::string> hosts;
  for (int i = 4096; i >= 1; --i) {
    char name[32];
    std::snprintf(name, sizeof name, "gpu%04d", i);
    if (i != 2048) hosts.push_back(name);
  }
  EXPECT_EQ(tp::slurm_hostlist(hosts), "gpu[0001-2047,2049-4096]");
}

TEST(DrainReason, OneLineWithoutQuotesAtMost128Characters) {
  const tp::FlaggedNode node{
      "n1",
      {"rank 3 is a straggler: compute \"p50\" 10 ms\n\tagainst 5 ms", "topology: ens1 speed"}};
  EXPECT_EQ(tp::drain_reason(node),
            "trainproof: rank 3 is a straggler: compute p50 10 ms against 5 ms (and 1 more)");
  const tp::FlaggedNode wordy{"n2", {std::string(300, 'x')}};
  const std::string cut = tp::drain_reason(wordy);
  EXPECT_EQ(cut.size(), 128u);
  EXPECT_EQ(cut.substr(cut.size() - 3), "...");
  EXPECT_EQ(tp::drain_reason({"n3", {}}), "trainproof: flagged");
}

TEST(RenderNodes, EveryFormatNamesExactlyTheFlaggedNodes) {
  const json report = report_with({{"vc-n3", {"send direction measured again at 30 MB/s"}},
                                   {"vc-n1", {"rank 0 is a straggler"}}},
                                  {"vc-n2"});
  const auto nodes = tp::flagged_nodes_of(report);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(tp::render_nodes(nodes, "list"),
            "vc-n3\n  - send direction measured again at 30 MB/s\nvc-n1\n  - rank 0 is a "
            "straggler\n");
  EXPECT_EQ(tp::render_nodes(nodes, "hostlist"), "vc-n[1,3]\n");
  EXPECT_EQ(tp::render_nodes(nodes, "drain"),
            "scontrol update NodeName=vc-n3 State=DRAIN Reason=\"trainproof: send direction "
            "measured again at 30 MB/s\"\n"
            "scontrol update NodeName=vc-n1 State=DRAIN Reason=\"trainproof: rank 0 is a "
            "straggler\"\n");
  const json parsed = json::parse(tp::render_nodes(nodes, "json"));
  EXPECT_EQ(parsed["schema"], "trainproof.nodes/1");
  EXPECT_EQ(parsed["hostlist"], "vc-n[1,3]");
  EXPECT_EQ(parsed["flagged"][0]["host"], "vc-n3");
  EXPECT_THROW(tp::render_nodes(nodes, "csv"), tp::UsageError);
}

TEST(RenderNodes, NothingFlaggedPrintsNoCommandAndAnOddNameIsLeftOut) {
  const auto none = tp::flagged_nodes_of(report_with({}, {"a", "b"}));
  EXPECT_EQ(tp::render_nodes(none, "drain"), "");
  EXPECT_EQ(tp::render_nodes(none, "hostlist"), "");
  EXPECT_EQ(tp::render_nodes(none, "list"), "no node flagged\n");
  EXPECT_EQ(tp::node_action_lines(report_with({}, {"a"}), "r.json"), "");
  const auto odd = tp::flagged_nodes_of(report_with({{"a;reboot", {"x"}}}));
  EXPECT_EQ(tp::render_nodes(odd, "drain"),
            "# left out: host name 'a;reboot' is not one scontrol takes as it is\n");
}

TEST(NodeActionLines, TheSummaryEndsWithTheHostListAndTheDrainCommand) {
  const json report = report_with({{"vc-n2", {"slow"}}, {"vc-n3", {"slow"}}});
  EXPECT_EQ(tp::node_action_lines(report, "out/accept.json"),
            "nodes to act on (2): vc-n[2-3]\n"
            "  their drain lines: trainproof report nodes out/accept.json --format=drain\n");
  EXPECT_THAT(tp::node_action_lines(report, "my report.json"), HasSubstr("'my report.json'"));
}

}  // namespace
