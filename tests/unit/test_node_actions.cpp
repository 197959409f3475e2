// The nodes to act on (app/report/node_actions.h, drain_lines.h): Slurm's compressed host list,
// NHC-style drain reasons, resume lines and the formats of `trainproof report nodes`, and that
// every line is safe to paste whatever the report's host names, reasons and path hold.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

#include "app/report/drain_lines.h"
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

// A pairwise report: vc-n3 FAILs (its send direction at 2.8% of the control), vc-n4 only WARNs
// (a straggler), vc-n1 and vc-n2 pass.
json pairwise_report() {
  const std::string flag =
      "vc-n3: send direction measured again at 36 MB/s, 2.8% of the control vc-n1 -> vc-n2 at "
      "1.3 GB/s (10 alternated transfers each, noise 4%); first pass 40 MB/s, 3.1% of the fabric "
      "median 1.3 GB/s (one direction at a time)";
  json report = report_with({{"vc-n3", {flag, "InfiniBand mlx5_0 port 1 symbol_error +3"}},
                             {"vc-n4", {"rank 5 is a straggler: compute p50 9 ms"}}},
                            {"vc-n1", "vc-n2"});
  report["context"]["run_id"] = "accept-2026-12-03T10:00:00Z";
  report["nodes"][0]["findings"] = {{{"check", "pairwise_flags"},
                                     {"status", "fail"},
                                     {"reason", flag},
                                     {"summary", "send 36 MB/s = 2.8% of control"}},
                                    {{"check", "pairwise_flags"},
                                     {"status", "warn"},
                                     {"reason", "InfiniBand mlx5_0 port 1 symbol_error +3"}}};
  report["nodes"][1]["findings"] = {
      {{"check", "min_straggler_score"}, {"reason", "rank 5 is a straggler: compute p50 9 ms"}}};
  report["gate"]["checks"] = {{{"name", "pairwise_flags"}, {"status", "fail"}},
                              {{"name", "min_straggler_score"}, {"status", "warn"}}};
  return report;
}

TEST(DrainReason, TheCheckAndVerdictComeFirstAndTheRunIdSurvivesTheCut) {
  const tp::ReportNodes nodes = tp::report_nodes_of(pairwise_report());
  ASSERT_EQ(nodes.flagged.size(), 2u);
  const std::string reason = tp::drain_reason(nodes.flagged[0], nodes.run_id);
  EXPECT_EQ(reason.rfind("trainproof: pairwise_flags FAIL: send 36 MB/s = 2.8% of control (+1 "
                         "more); send direction mea",
                         0),
            0u)
      << reason;
  EXPECT_EQ(reason.size(), 128u) << reason;
  EXPECT_THAT(reason, ::testing::EndsWith("... run=accept-2026-12-03T10:00:00Z"));
  EXPECT_EQ(reason.find("vc-n3"), std::string::npos) << "the node's name is the line's already";
  // The straggler takes its check's status from gate.checks[].
  EXPECT_EQ(tp::drain_reason(nodes.flagged[1], nodes.run_id),
            "trainproof: min_straggler_score WARN: rank 5 is a straggler: compute p50 9 ms "
            "run=accept-2026-12-03T10:00:00Z");
}

TEST(DrainReason, OneLineWithoutQuotesAtMost128Characters) {
  tp::FlaggedNode node{
      "n1",
      {"rank 3 is a straggler: compute \"p50\" 10 ms\n\tagainst 5 ms", "topology: ens1 speed"},
      {}};
  node.findings = {{"flagged_nodes", "warn", node.reasons[0], ""},
                   {"topology", "warn", node.reasons[1], ""}};
  EXPECT_EQ(tp::drain_reason(node, ""),
            "trainproof: flagged_nodes WARN: rank 3 is a straggler: compute p50 10 ms against 5 ms "
            "(+1 more)");
  const tp::FlaggedNode wordy{"n2", {}, {{"topology", "fail", std::string(300, 'x'), ""}}};
  const std::string cut = tp::drain_reason(wordy, "r1");
  EXPECT_EQ(cut.size(), 128u);
  EXPECT_THAT(cut, ::testing::EndsWith("... run=r1"));
  EXPECT_EQ(tp::drain_reason({"n3", {}, {}}, ""), "trainproof: flagged WARN: flagged");
}

TEST(DrainReason, AReportWithoutFindingsTakesTheWorstNodeCheck) {
  json report = report_with({{"n1", {"n1: slow"}}});
  report["gate"]["checks"] = {{{"name", "pairwise_flags"}, {"status", "fail"}},
                              {{"name", "topology"}, {"status", "pass"}}};
  const tp::ReportNodes nodes = tp::report_nodes_of(report);
  EXPECT_EQ(tp::drain_reason(nodes.flagged.at(0), ""), "trainproof: flagged FAIL: slow");
}

TEST(RenderNodes, DrainTakesTheFailNodesAndTheWarnOnesOnlyWhenAsked) {
  const tp::ReportNodes nodes = tp::report_nodes_of(pairwise_report());
  const std::string fail = tp::render_nodes(nodes, "drain");
  EXPECT_EQ(fail.rfind("scontrol update NodeName=vc-n3 State=DRAIN Reason='trainproof: "
                       "pairwise_flags FAIL: send 36 MB/s",
                       0),
            0u)
      << fail;
  EXPECT_EQ(std::count(fail.begin(), fail.end(), '\n'), 1) << fail;
  const std::string warn = tp::render_nodes(nodes, "drain", "warn");
  EXPECT_THAT(warn, HasSubstr("\nscontrol update NodeName=vc-n4 State=DRAIN Reason='trainproof: "
                              "min_straggler_score WARN: rank 5"));
  EXPECT_THROW(tp::render_nodes(nodes, "drain", "pass"), tp::UsageError);
}

TEST(RenderNodes, ResumeActsOnlyOnTheNodesTrainproofDrained) {
  const tp::ReportNodes nodes = tp::report_nodes_of(pairwise_report());
  EXPECT_EQ(tp::render_nodes(nodes, "resume"),
            "case \"$(sinfo -h -N -n vc-n1 -o %E)\" in 'trainproof: '*) scontrol update "
            "NodeName=vc-n1 State=RESUME ;; esac\n"
            "case \"$(sinfo -h -N -n vc-n2 -o %E)\" in 'trainproof: '*) scontrol update "
            "NodeName=vc-n2 State=RESUME ;; esac\n");
  json unjudged = report_with({}, {"a"});
  unjudged["gate"]["checks"] = {{{"name", "flagged_nodes"}, {"status", "n/a"}}};
  EXPECT_EQ(tp::render_nodes(tp::report_nodes_of(unjudged), "resume").rfind("# ", 0), 0u);
}

TEST(RenderNodes, EveryFormatNamesExactlyTheFlaggedNodes) {
  const json report = report_with({{"vc-n3", {"send direction measured again at 30 MB/s"}},
                                   {"vc-n1", {"rank 0 is a straggler"}}},
                                  {"vc-n2"});
  const auto nodes = tp::report_nodes_of(report);
  ASSERT_EQ(nodes.flagged.size(), 2u);
  EXPECT_EQ(tp::render_nodes(nodes, "list"),
            "vc-n3: WARN\n  - flagged WARN: send direction measured again at 30 MB/s\n"
            "vc-n1: WARN\n  - flagged WARN: rank 0 is a straggler\n");
  EXPECT_EQ(tp::render_nodes(nodes, "hostlist"), "vc-n[1,3]\n");
  EXPECT_EQ(tp::render_nodes(nodes, "drain", "warn"),
            "scontrol update NodeName=vc-n3 State=DRAIN Reason='trainproof: flagged WARN: send "
            "direction measured again at 30 MB/s'\n"
            "scontrol update NodeName=vc-n1 State=DRAIN Reason='trainproof: flagged WARN: rank 0 "
            "is a straggler'\n");
  const json parsed = json::parse(tp::render_nodes(nodes, "json"));
  EXPECT_EQ(parsed["schema"], "trainproof.nodes/1");
  EXPECT_EQ(parsed["hostlist"], "vc-n[1,3]");
  EXPECT_EQ(parsed["flagged"][0]["host"], "vc-n3");
  EXPECT_EQ(parsed["flagged"][0]["status"], "warn");
  EXPECT_THROW(tp::render_nodes(nodes, "csv"), tp::UsageError);
}

TEST(RenderNodes, NothingFlaggedPrintsNoCommandAndAnOddNameIsLeftOut) {
  const auto none = tp::report_nodes_of(report_with({}, {"a", "b"}));
  EXPECT_EQ(tp::render_nodes(none, "drain"), "");
  EXPECT_EQ(tp::render_nodes(none, "hostlist"), "");
  EXPECT_EQ(tp::render_nodes(none, "list"), "no node flagged\n");
  EXPECT_EQ(tp::node_action_lines(report_with({}, {"a"}), "r.json"), "");
  const auto odd = tp::report_nodes_of(report_with({{"a;reboot", {"x"}}}));
  EXPECT_EQ(tp::render_nodes(odd, "drain", "warn"),
            "# left out: host name 'a;reboot' is not one scontrol takes as it is\n");
}

TEST(NodeActionLines, TheSummaryEndsWithTheHostListAndTheDrainCommands) {
  const json report = pairwise_report();
  EXPECT_EQ(tp::node_action_lines(report, "out/accept.json"),
            "nodes to act on (2): vc-n[3-4]\n"
            "  their drain lines (1 FAIL): trainproof report nodes out/accept.json "
            "--format=drain\n"
            "  with the 1 WARN: trainproof report nodes out/accept.json --format=drain "
            "--min-status=warn\n");
  EXPECT_EQ(tp::node_action_lines(report_with({{"vc-n2", {"slow"}}}), "r.json"),
            "nodes to act on (1): vc-n2\n"
            "  the 1 WARN: trainproof report nodes r.json --format=drain --min-status=warn\n");
  EXPECT_THAT(tp::node_action_lines(report, "my report.json"), HasSubstr("'my report.json'"));
}

// Runs `script` with sh in a fresh folder, scontrol, sinfo and trainproof replaced by functions
// that write their arguments one a line to ./args; returns what they wrote, or "RAN" when
// anything in the script ran a command of its own (it made ./pwned).
std::string run_pasted(const std::string& script) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("node_lines_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    std::ofstream sh(dir / "lines.sh");
    sh << "scontrol() { printf '%s\\n' \"$@\" >> args; }\n"
          "trainproof() { printf '%s\\n' \"$@\" >> args; }\n"
          "sinfo() { printf 'trainproof: pairwise_flags FAIL: earlier\\n'; }\n"
       << script;
  }
  const std::string command = "cd '" + dir.string() + "' && sh lines.sh >/dev/null 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << script;
  std::string args;
  if (std::ifstream in(dir / "args"); in) args.assign(std::istreambuf_iterator<char>(in), {});
  const bool ran = fs::exists(dir / "pwned");
  fs::remove_all(dir);
  return ran ? "RAN" : args;
}

TEST(NodeLines, HostileHostsReasonsRunIdsAndPathsRunNothingWhenPasted) {
  const std::vector<std::string> hostile = {
      "$(touch pwned)",   "`touch pwned`",         "'; touch pwned; '", "\"; touch pwned; \"",
      "x\ntouch pwned\n", "x\\'$(touch pwned)\\'", "a & touch pwned",   "x > pwned"};
  for (const std::string& bad : hostile) {
    json report = report_with({{"vc-n1", {bad}}, {bad, {"slow"}}}, {"vc-n2", bad + "b"});
    report["context"]["run_id"] = bad;
    report["gate"]["checks"] = {{{"name", "flagged_nodes"}, {"status", "fail"}}};
    const tp::ReportNodes nodes = tp::report_nodes_of(report);
    const std::string drain = tp::render_nodes(nodes, "drain");
    const std::string args = run_pasted(drain);
    ASSERT_NE(args, "RAN") << drain;
    // One scontrol call, for the plain name, its reason one argument.
    EXPECT_EQ(
        args.rfind("update\nNodeName=vc-n1\nState=DRAIN\nReason=trainproof: flagged FAIL: ", 0), 0u)
        << drain << args;
    EXPECT_EQ(std::count(args.begin(), args.end(), '\n'), 4) << args;
    const std::string resume = run_pasted(tp::render_nodes(nodes, "resume"));
    EXPECT_EQ(resume, "update\nNodeName=vc-n2\nState=RESUME\n") << bad;
    for (const std::string& path : {bad, bad + "/r.json"}) {
      const std::string lines = tp::node_action_lines(report, path);
      const std::string command = lines.substr(lines.find("trainproof report"));
      const std::string ran = run_pasted(command.substr(0, command.find('\n')));
      ASSERT_NE(ran, "RAN") << lines;
      const bool one_line = path.find('\n') == std::string::npos;
      EXPECT_EQ(ran, "report\nnodes\n" + (one_line ? path : "REPORT") + "\n--format=drain\n")
          << lines;
    }
  }
}

}  // namespace
