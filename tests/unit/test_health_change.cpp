// What rose on a node during a load (node/health_change.h), and accept's judgement of every
// node's findings on rank 0 (app/accept/accept_health.h), on synthetic records of 4,096 nodes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "app/accept/accept_health.h"
#include "node/health_change.h"

namespace {

using ::testing::HasSubstr;

tp::DriverView two_healthy_gpus() {
  tp::DriverView view;
  view.loaded = true;
  for (int i = 0; i < 2; ++i) {
    tp::DriverGpu g;
    g.index = i;
    g.uuid = "GPU-" + std::to_string(100 + i);
    g.pci_address = "0000:1" + std::to_string(i) + ":00.0";
    g.nvlinks_up = 18;
    g.health.ecc_uncorrected_volatile = 0;
    g.health.retired_sbe = g.health.retired_dbe = 0;
    g.health.retired_pending = g.health.remap_pending = g.health.remap_failed = 0;
    g.health.remapped_uncorrectable = 0;
    g.health.pcie_replays = 4;
    g.health.nvlink_replay = g.health.nvlink_recovery = g.health.nvlink_crc = 0;
    view.gpus.push_back(g);
  }
  return view;
}

std::vector<std::string> reasons(const std::vector<tp::HealthFinding>& findings) {
  std::vector<std::string> out;
  for (const auto& f : findings) out.push_back(f.status + " " + f.reason);
  return out;
}

// accept reads each node at every stage's end: a counter is named with the stage it rose in, a
// port with its rail, and a stage in which nothing rose adds nothing.
TEST(GpuChange, EachRiseIsNamedWithTheStageItRoseIn) {
  const auto read = [](const tp::DriverView& driver, long long symbol_errors) {
    tp::NodeRead r;
    r.taken = true;
    r.machine.host = "n7";
    r.driver = driver;
    tp::RdmaPort port;
    port.device = "mlx5_1";
    port.port = "1";
    port.state = "ACTIVE";
    port.counters["symbol_error"] = symbol_errors;
    r.machine.rdma_ports.push_back(port);
    return r;
  };
  const tp::DriverView healthy = two_healthy_gpus();
  tp::DriverView errors = healthy;
  errors.gpus[1].health.ecc_uncorrected_volatile = 2;
  tp::NodeChanges changes;
  changes.last = read(healthy, 0);
  tp::add_stage_change(changes, read(healthy, 0), {"mlx5_0", "mlx5_1"}, "preflight");
  tp::add_stage_change(changes, read(healthy, 9), {"mlx5_0", "mlx5_1"}, "pairwise");
  tp::add_stage_change(changes, read(errors, 9), {"mlx5_0", "mlx5_1"}, "train");
  tp::add_stage_change(changes, read(errors, 9), {"mlx5_0", "mlx5_1"}, "restore");
  EXPECT_TRUE(changes.judged);
  EXPECT_THAT(reasons(changes.findings),
              ::testing::ElementsAre(
                  "warn n7: mlx5_1 port 1 (rail 1): symbol_error rose by 9 (0 -> 9) during the "
                  "pairwise stage",
                  "fail n7: GPU 1 (GPU-101, 0000:11:00.0): uncorrectable ECC errors rose by 2 "
                  "(0 -> 2) during the train stage"));
  // On a rank that is not its node's first, nothing is read and nothing judged.
  tp::NodeChanges other;
  tp::add_stage_change(other, tp::NodeRead{}, {}, "train");
  EXPECT_FALSE(other.judged);
  EXPECT_TRUE(other.findings.empty());
}

TEST(GpuChange, TwoEqualReadsGiveNothingAndEachRiseItsOwnFinding) {
  const tp::DriverView before = two_healthy_gpus();
  EXPECT_TRUE(tp::judge_gpu_change("n7", before, before).empty());

  tp::DriverView after = before;
  after.gpus[1].health.ecc_uncorrected_volatile = 2;
  EXPECT_THAT(reasons(tp::judge_gpu_change("n7", before, after)),
              ::testing::ElementsAre("fail n7: GPU 1 (GPU-101, 0000:11:00.0): uncorrectable ECC "
                                     "errors rose by 2 (0 -> 2) during the load"));
  after = before;
  after.gpus[0].health.remap_pending = 1;
  after.gpus[0].health.retired_dbe = 1;
  EXPECT_THAT(reasons(tp::judge_gpu_change("n7", before, after)),
              ::testing::ElementsAre(
                  HasSubstr("GPU 0 (GPU-100, 0000:10:00.0): retired pages rose by 1"),
                  HasSubstr("GPU 0 (GPU-100, 0000:10:00.0): a row remap became pending")));
  after = before;
  after.gpus[0].nvlinks_up = 17;
  after.gpus[0].health.nvlink_crc = 40;
  after.gpus[1].health.pcie_replays = 9;
  EXPECT_THAT(
      reasons(tp::judge_gpu_change("n7", before, after)),
      ::testing::ElementsAre(
          HasSubstr(
              "fail n7: GPU 0 (GPU-100, 0000:10:00.0): 1 NVLink link(s) went down (18 -> 17 up)"),
          HasSubstr("warn n7: GPU 0 (GPU-100, 0000:10:00.0): NVLink CRC errors rose by 40"),
          HasSubstr("warn n7: GPU 1 (GPU-101, 0000:11:00.0): PCIe replays rose by 5 (4 -> 9)")));
}

TEST(GpuChange, AGpuGoneFromTheDriverIsNamedAndUnreportedFieldsAreNotJudged) {
  const tp::DriverView before = two_healthy_gpus();
  tp::DriverView after = before;
  after.gpus.erase(after.gpus.begin());
  EXPECT_THAT(reasons(tp::judge_gpu_change("n7", before, after)),
              ::testing::ElementsAre("fail n7: GPU 0 (GPU-100, 0000:10:00.0): left the driver "
                                     "during the load"));
  tp::DriverView unknown = before;
  unknown.gpus[0].health.ecc_uncorrected_volatile = -1;  // not reported before
  after = before;
  after.gpus[0].health.ecc_uncorrected_volatile = 3;
  EXPECT_TRUE(tp::judge_gpu_change("n7", unknown, after).empty());
  tp::DriverView unloaded;
  EXPECT_TRUE(tp::judge_gpu_change("n7", unloaded, after).empty());
}

tp::RdmaPort port(const std::string& device, long long symbol_errors, long long link_downed) {
  tp::RdmaPort p;
  p.device = device;
  p.port = "1";
  p.state = "ACTIVE";
  p.counters = {{"symbol_error", symbol_errors}, {"link_downed", link_downed}};
  return p;
}

TEST(PortChange, ARisingCounterIsItsPortsFindingWithBothReads) {
  const std::vector<tp::RdmaPort> before = {port("mlx5_0", 3, 0), port("mlx5_1", 0, 1)};
  EXPECT_TRUE(tp::judge_port_change("n7", before, before).empty());
  std::vector<tp::RdmaPort> after = {port("mlx5_0", 3, 0), port("mlx5_1", 250, 2)};
  EXPECT_THAT(reasons(tp::judge_port_change("n7", before, after)),
              ::testing::ElementsAre(
                  "fail n7: mlx5_1 port 1: link_downed rose by 1 (1 -> 2) during the load",
                  "warn n7: mlx5_1 port 1: symbol_error rose by 250 (0 -> 250) during the load"));
  after = before;
  after[0].state = "DOWN";
  EXPECT_THAT(reasons(tp::judge_port_change("n7", before, after)),
              ::testing::ElementsAre(HasSubstr("n7: mlx5_0 port 1: went from ACTIVE to DOWN")));
  after = {port("mlx5_0", 9, 0)};  // a port gone: the inventory's to name, not this rule's
  EXPECT_EQ(tp::judge_port_change("n7", before, after).size(), 1u);
}

// One record per rank of a 4,096-node job with 8 ranks a node: only each node's first rank
// carries its node's record.
std::vector<tp::NodeHealthRecord> job_records(int flagged_node) {
  std::vector<tp::NodeHealthRecord> all(4096 * 8);
  for (int node = 0; node < 4096; ++node) {
    tp::NodeHealthRecord& r = all[size_t(node) * 8];
    r.host = "gpu-node-" + std::to_string(node);
    r.judged = true;
    if (node == flagged_node)
      r.findings.push_back({"warn", r.host + ": mlx5_3 port 1: symbol_error rose by 9", "cable"});
  }
  return all;
}

TEST(NodeHealth, OneNodeOf4096IsNamedAloneAndAHealthyJobPasses) {
  const tp::HealthStage healthy = tp::judge_node_health("health_change", job_records(-1), "fine");
  EXPECT_EQ(healthy.check["status"], "pass");
  EXPECT_EQ(healthy.check["reason"], "fine on 4096 of 4096 node(s)");
  EXPECT_TRUE(healthy.findings.empty());

  const tp::HealthStage one = tp::judge_node_health("health_change", job_records(2711), "fine");
  EXPECT_EQ(one.check["status"], "warn");
  EXPECT_THAT(one.check["reason"].get<std::string>(),
              HasSubstr("1 finding(s) on 1 node(s) (4096 of 4096 node(s) judged); first: "
                        "gpu-node-2711: mlx5_3"));
  ASSERT_EQ(one.findings.size(), 1u);
  EXPECT_EQ(one.findings[0].first, "gpu-node-2711");
  EXPECT_EQ(one.findings[0].second["check"], "health_change");
  EXPECT_EQ(one.findings[0].second["status"], "warn");
  EXPECT_EQ(one.findings[0].second["action"], "cable");
}

TEST(NodeHealth, NodesThatCannotBeReadAreNamedNotPassed) {
  std::vector<tp::NodeHealthRecord> all = job_records(-1);
  for (auto& r : all) {
    r.judged = false;
    r.why_not = "the GPU driver could not be asked (Driver Not Loaded)";
  }
  const tp::HealthStage none = tp::judge_node_health("gpu_health", all, "fine");
  EXPECT_EQ(none.check["status"], "n/a");
  EXPECT_THAT(none.check["reason"].get<std::string>(),
              HasSubstr("first: gpu-node-0: the GPU driver could not be asked"));
  all[8].judged = true;  // one node can be judged: the check says the rest were not
  const tp::HealthStage some = tp::judge_node_health("gpu_health", all, "fine");
  EXPECT_EQ(some.check["status"], "pass");
  EXPECT_THAT(some.check["reason"].get<std::string>(),
              HasSubstr("fine on 1 of 4096 node(s) (not judged: gpu-node-0: the GPU driver"));
}

}  // namespace
