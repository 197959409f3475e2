// The sweep report's verdict and summary figures from typed records (app/stages/sweep_report.h).
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "app/report/sweep_summary.h"
#include "app/stages/sweep_report.h"

namespace {

using nlohmann::json;
using tp::CollectiveOp;

tp::SweepRow row(uint64_t bytes, double busbw, bool in_place = false) {
  tp::SweepRow r;
  r.op = CollectiveOp::allreduce;
  r.bytes = bytes;
  r.count = bytes / 4;
  r.in_place = in_place;
  r.mean_us = 10;
  r.busbw_gbps = busbw;
  r.algbw_gbps = busbw / 1.5;
  return r;
}

tp::SweepRecord record() {
  tp::SweepRecord rec;
  rec.config.plan.ops = {CollectiveOp::allreduce};
  rec.backend = "mpi";
  rec.host_of_rank = {"a", "a", "b", "b"};
  rec.hosts = {"a", "b"};
  rec.context = {{"world_size", 4}, {"hosts", {"a", "b"}}, {"warnings", nlohmann::json::array()}};
  return rec;
}

TEST(SweepReport, RightRowsPassAndAverageAsNcclTestsDoes) {
  tp::SweepRecord rec = record();
  rec.groups.push_back({"world", {0, 1, 2, 3}, {row(1024, 1), row(1 << 20, 4), row(1 << 21, 8)}});
  const auto report = tp::build_sweep_report(rec);
  EXPECT_EQ(report["verdict"], "PASS");
  EXPECT_EQ(report["schema"], "trainproof.report/3");
  const auto& g = report["sweep"]["groups"][0];
  EXPECT_DOUBLE_EQ(g["avg_busbw_gbps"].get<double>(), 13.0 / 3);
  EXPECT_DOUBLE_EQ(g["avg_busbw_gbps_1mib"].get<double>(), 6.0);
  EXPECT_EQ(report["sweep"]["slowest_group"], "");
  EXPECT_EQ(report["nodes"].size(), 2u);
}

TEST(SweepReport, AWrongElementIsFailNamingRankAndHost) {
  tp::SweepRecord rec = record();
  tp::SweepRow bad = row(4096, 2, true);
  bad.wrong = 3;
  bad.first_wrong_rank = 2;
  rec.groups.push_back({"world", {0, 1, 2, 3}, {row(4096, 2), bad}});
  const auto report = tp::build_sweep_report(rec);
  EXPECT_EQ(report["verdict"], "FAIL");
  EXPECT_EQ(report["sweep"]["wrong"], 3);
  const auto& checks = report["gate"]["checks"];
  EXPECT_EQ(checks[0]["name"], "topology");
  EXPECT_EQ(checks[1]["name"], "sweep_correctness");
  const std::string reason = checks[1]["reason"];
  EXPECT_NE(reason.find("allreduce 4096 B in place"), std::string::npos) << reason;
  EXPECT_NE(reason.find("rank 2 (host b)"), std::string::npos) << reason;
}

TEST(SweepReport, TheSlowestGroupIsNamedByItsLargeMessageBandwidth) {
  tp::SweepRecord rec = record();
  rec.groups.push_back({"node a", {0, 1}, {row(1024, 9), row(1 << 20, 5)}});
  rec.groups.push_back({"node b", {2, 3}, {row(1024, 1), row(1 << 20, 7)}});
  EXPECT_EQ(tp::build_sweep_report(rec)["sweep"]["slowest_group"], "node a");
}

TEST(SweepReport, ATopologyFlagWarnsAndNamesTheNode) {
  tp::SweepRecord rec = record();
  rec.groups.push_back({"world", {0, 1, 2, 3}, {row(4096, 2)}});
  rec.topology_reasons["b"] = {"topology: 0000:41:00.0 (network): PCIe link trained to x8"};
  const auto report = tp::build_sweep_report(rec);
  EXPECT_EQ(report["verdict"], "WARN");
  EXPECT_EQ(report["nodes"][1]["flagged"], true);
  EXPECT_EQ(report["nodes"][1]["reasons"][0], rec.topology_reasons["b"][0]);
  EXPECT_EQ(report["nodes"][0]["flagged"], false);
}

TEST(SweepReport, FewIterationsAreSaid) {
  tp::SweepRecord rec = record();
  rec.config.plan.iters = 3;
  rec.groups.push_back({"world", {0, 1, 2, 3}, {row(4096, 2)}});
  const auto warnings = tp::build_sweep_report(rec)["context"]["warnings"];
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], "only 3 timed iterations per row: p50 and p99 rest on few samples");
}

TEST(SweepReport, NothingMeasuredIsNotAPass) {
  tp::SweepRecord rec = record();
  tp::SweepRow skipped = row(1024, 0);
  skipped.not_run = "no such operation here";
  rec.groups.push_back({"world", {0, 1, 2, 3}, {skipped}});
  const json report = tp::build_sweep_report(rec);
  EXPECT_EQ(report["verdict"], "WARN");
  // No element was checked: correctness is n/a, not a pass.
  for (const json& check : report["gate"]["checks"])
    if (check["name"] == "sweep_correctness") {
      EXPECT_EQ(check["status"], "n/a");
      EXPECT_EQ(check["reason"], "no row ran: no element was checked");
    }
}

TEST(SweepReport, TopologyNotReadIsNotApplicable) {
  tp::SweepRecord rec = record();
  rec.groups.push_back({"world", {0, 1, 2, 3}, {row(4096, 2)}});
  rec.topology_measured = false;
  const json check = tp::build_sweep_report(rec)["gate"]["checks"][0];
  EXPECT_EQ(check["name"], "topology");
  EXPECT_EQ(check["status"], "n/a");
  EXPECT_EQ(check["reason"], "preflight.topology=false: no node's topology was read");
}

TEST(SweepReport, RowsSurviveTheirJson) {
  tp::SweepRow r = row(8192, 3.5, true);
  r.op = CollectiveOp::broadcast;
  r.type = tp::ElementType::bf16;
  r.root = 0;
  r.p50_us = 9;
  r.p99_us = 12;
  r.wrong = 1;
  r.first_wrong_rank = 3;
  const tp::SweepRow back = tp::sweep_row_from_json(tp::sweep_row_json(r, "g"));
  EXPECT_EQ(tp::sweep_row_json(back, "g"), tp::sweep_row_json(r, "g"));
}

TEST(SweepTable, ALineHasNcclTestsColumnsAndNotApplicableInPlace) {
  tp::SweepRow r = row(1048576, 7.63);
  r.op = CollectiveOp::alltoall;
  r.mean_us = 137.5;
  tp::SweepRow in = r;
  in.in_place = true;
  in.not_run = "NCCL's alltoall is grouped sends and receives, which cannot share one buffer";
  const std::string line =
      tp::sweep_table_line(tp::sweep_row_json(r, "world"), tp::sweep_row_json(in, "world"));
  EXPECT_EQ(line,
            "     1048576        262144     float    none      -1    137.5    5.09    7.63       0"
            "      N/A     N/A     N/A     N/A\n");
}

// What nccl-tests' output consumers match a row with: both passes' time, algbw and busbw are
// numbers.
const std::regex kNcclTestsRow(
    R"(^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+|N/A))"
    R"(\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+|N/A)\s*$)");

TEST(SweepTable, ASendrecvRowRunInPlaceReadsAsNcclTestsPrintsIt) {
  tp::SweepRow r = row(1048576, 7.63);
  r.op = CollectiveOp::sendrecv;
  r.mean_us = 137.5;
  tp::SweepRow in = r;
  in.in_place = true;
  in.mean_us = 140.25;
  std::string line =
      tp::sweep_table_line(tp::sweep_row_json(r, "world"), tp::sweep_row_json(in, "world"));
  EXPECT_EQ(line,
            "     1048576        262144     float    none      -1    137.5    5.09    7.63       0"
            "    140.2    5.09    7.63       0\n");
  line.pop_back();
  EXPECT_TRUE(std::regex_match(line, kNcclTestsRow)) << line;
}

TEST(SweepTable, TheHeaderNamesEveryRanksDeviceUpTo64AndTheTestItStarts) {
  nlohmann::json devices = nlohmann::json::array();
  std::vector<int> ranks;
  for (int r = 0; r < 4096; ++r) {
    devices.push_back({{"rank", r},
                       {"host", "gpu" + std::to_string(r / 8)},
                       {"pid", 1000 + r},
                       {"device", r % 8},
                       {"pci_bus_id", "0000:1" + std::to_string(r % 8) + ":00.0"},
                       {"name", "NVIDIA H200"}});
    ranks.push_back(r);
  }
  const std::string header = tp::sweep_table_header("allreduce", "world", ranks, devices, 0);
  EXPECT_EQ(header.rfind("#\n# Collective test starting: all_reduce_perf\n#\n# Using devices\n", 0),
            0u)
      << header;
  EXPECT_NE(header.find("#  Rank  9 Group  0 Pid   1009 on       gpu1 device  1 [0000:11:00] "
                        "NVIDIA H200\n"),
            std::string::npos)
      << header;
  const std::regex rank_line(R"(^#  Rank\s+\d+ Group\s+\d+ Pid\s+\d+ on\s+\S+ device\s+-?\d+ )"
                             R"(\[[^\]]+\] .+$)");
  size_t lines = 0;
  std::istringstream in(header);
  for (std::string line; std::getline(in, line);) lines += std::regex_match(line, rank_line);
  EXPECT_EQ(lines, tp::kDeviceLines);
  EXPECT_NE(header.find("#  ... and 4032 more ranks"), std::string::npos);
  const std::string few = tp::sweep_table_header("sendrecv", "node gpu0", {0, 1}, devices, 3);
  EXPECT_NE(few.find("#  Rank  1 Group  3 Pid   1001 on       gpu0 device  1 [0000:11:00]"),
            std::string::npos)
      << few;
  EXPECT_EQ(few.find("more ranks"), std::string::npos);
}

TEST(SweepTable, TheClosingLinesSayTheTestConcluded) {
  nlohmann::json r = tp::sweep_row_json(row(1048576, 7.63), "world");
  r["op"] = "sendrecv";
  const std::string closing = tp::sweep_op_closing_lines({r});
  EXPECT_NE(closing.find("# Avg bus bandwidth    : 7.63\n"), std::string::npos) << closing;
  EXPECT_NE(closing.find("\n#\n# Collective test concluded: sendrecv_perf\n"), std::string::npos)
      << closing;
}

}  // namespace
