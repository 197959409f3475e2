// What a node's GPUs did during a load (node/load_health.h): clock reasons over the samples, the
// PCIe link while busy, XIDs from NVML and the kernel log (node/xid_rules.h), on synthetic
// watch records.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "node/load_health.h"
#include "node/xid_rules.h"

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

tp::DriverGpu gpu(int index) {
  tp::DriverGpu g;
  g.index = index;
  g.uuid = "GPU-" + std::to_string(100 + index);
  g.pci_address = "0000:" + std::to_string(18 + index) + ":00.0";
  g.max_pcie_gen = 5;
  g.max_pcie_width = 16;
  return g;
}

tp::GpuHealth busy(long long reasons = tp::kClocksSwPowerCap, int gen = 5, int width = 16) {
  tp::GpuHealth h;
  h.clock_event_reasons = reasons;
  h.pcie_gen = gen;
  h.pcie_width = width;
  h.temperature_c = 61;
  h.power_w = 690;
  h.sm_clock_mhz = 1980;
  return h;
}

// Two GPUs, 100 samples each, busy at full link and capped by SW power (normal under load).
tp::NvmlWatchRecord healthy_watch() {
  tp::NvmlWatchRecord w;
  w.gpus = {gpu(0), gpu(1)};
  w.samples.assign(2, std::vector<tp::GpuHealth>(100, busy()));
  w.seconds = 50;
  return w;
}

tp::XidEvent xid_event(long long xid, const std::string& source, const std::string& pci_address,
                       const std::string& uuid = "") {
  tp::XidEvent x;
  x.xid = xid;
  x.source = source;
  x.pci_address = pci_address;
  x.uuid = uuid;
  return x;
}

tp::DriverView driver_of(const tp::NvmlWatchRecord& w) {
  tp::DriverView d;
  d.loaded = true;
  d.gpus = w.gpus;
  return d;
}

std::vector<std::string> judged(const tp::NvmlWatchRecord& w, const tp::LoadRules& rules = {},
                                bool busy_without_utilization = true) {
  const tp::LoadHealth load = tp::summarise_load(w, busy_without_utilization);
  std::vector<tp::HealthFinding> findings = tp::judge_load_health("n7", load, rules);
  const auto xids = tp::judge_xids("n7", load.xids, rules.xids, driver_of(w));
  findings.insert(findings.end(), xids.begin(), xids.end());
  std::vector<std::string> out;
  for (const tp::HealthFinding& f : findings) out.push_back(f.status + " " + f.reason);
  return out;
}

TEST(LoadHealth, AHealthyLoadCappedBySwPowerGivesNothing) {
  const tp::LoadHealth load = tp::summarise_load(healthy_watch(), true);
  ASSERT_EQ(load.gpus.size(), 2u);
  EXPECT_EQ(load.gpus[0].samples, 100);
  EXPECT_EQ(load.gpus[0].sw_power_cap, 100);
  EXPECT_EQ(load.gpus[0].best_pcie_gen, 5);
  EXPECT_EQ(load.gpus[0].hottest_c, 61);
  EXPECT_TRUE(judged(healthy_watch()).empty());
}

TEST(LoadHealth, HwSlowdownPastTheShareFailsItsGpuAlone) {
  tp::NvmlWatchRecord w = healthy_watch();
  // 5 of 100 is the share itself: not past it.
  for (int i = 0; i < 5; ++i) w.samples[1][i] = busy(tp::kClocksHwSlowdown);
  EXPECT_TRUE(judged(w).empty());
  w.samples[1][5] = busy(tp::kClocksHwSlowdown | tp::kClocksSwPowerCap);
  EXPECT_THAT(judged(w), ElementsAre("fail n7: GPU 1 (GPU-101, 0000:19:00.0): clocks held down "
                                     "by HW slowdown in 6 of 100 samples (6%) of the load"));
  // A host file's [health] share moves the line.
  tp::LoadRules lenient;
  lenient.clock_event_share = 0.1;
  EXPECT_TRUE(judged(w, lenient).empty());
}

TEST(LoadHealth, SwThermalWarnsAndEachHardwareReasonFails) {
  tp::NvmlWatchRecord w = healthy_watch();
  for (int i = 0; i < 50; ++i) w.samples[0][i] = busy(tp::kClocksSwThermal);
  for (int i = 0; i < 50; ++i)
    w.samples[1][i] = busy(tp::kClocksHwThermal | tp::kClocksHwPowerBrake);
  EXPECT_THAT(judged(w),
              ElementsAre(HasSubstr("warn n7: GPU 0 (GPU-100, 0000:18:00.0): clocks held down by "
                                    "SW thermal slowdown in 50 of 100 samples (50%)"),
                          HasSubstr("fail n7: GPU 1 (GPU-101, 0000:19:00.0): clocks held down by "
                                    "HW thermal slowdown"),
                          HasSubstr("GPU 1 (GPU-101, 0000:19:00.0): clocks held down by HW "
                                    "power brake")));
}

TEST(LoadHealth, ALinkBelowItsMaximumWhileBusyFails) {
  tp::NvmlWatchRecord w = healthy_watch();
  // At rest a GPU drops to Gen1; one sample at full speed shows the link can train there.
  w.samples[0][0] = busy(0, 1, 16);
  EXPECT_TRUE(judged(w).empty());
  for (auto& h : w.samples[1]) h = busy(tp::kClocksSwPowerCap, 4, 8);
  EXPECT_THAT(judged(w), ElementsAre("fail n7: GPU 1 (GPU-101, 0000:19:00.0): PCIe link at Gen4 "
                                     "x8 while busy (its maximum: Gen5 x16)"));
  // A GPU that does not report its link is not judged.
  for (auto& h : w.samples[1]) h = busy(tp::kClocksSwPowerCap, -1, -1);
  EXPECT_TRUE(judged(w).empty());
}

TEST(LoadHealth, TheLinkIsJudgedOnlyInSamplesWhereTheDriverSawTheGpuBusy) {
  tp::NvmlWatchRecord w = healthy_watch();
  // An accept whose stages left GPU 1 idle: Gen1 at rest says nothing of the link.
  for (auto& h : w.samples[1]) {
    h = busy(0, 1, 16);
    h.utilization_pct = 0;
  }
  EXPECT_TRUE(tp::judge_load_health("n7", tp::summarise_load(w, false), {}).empty());
  EXPECT_EQ(tp::summarise_load(w, false).gpus[1].busy_samples, 0);
  // Busy in 3 samples at Gen4 x8: judged on those, whatever the idle ones show.
  for (int i = 0; i < 3; ++i) {
    w.samples[1][i] = busy(tp::kClocksSwPowerCap, 4, 8);
    w.samples[1][i].utilization_pct = 97;
  }
  const tp::LoadHealth load = tp::summarise_load(w, false);
  EXPECT_EQ(load.gpus[1].busy_samples, 3);
  const auto findings = tp::judge_load_health("n7", load, {});
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].reason,
            "n7: GPU 1 (GPU-101, 0000:19:00.0): PCIe link at Gen4 x8 while busy (its maximum: "
            "Gen5 x16)");
  // Without the driver's utilization, a sample counts as busy only where the load is known to
  // keep every GPU busy (node-check's burn).
  tp::NvmlWatchRecord quiet = healthy_watch();
  for (auto& h : quiet.samples[0]) h = busy(0, 1, 16);
  EXPECT_TRUE(tp::judge_load_health("n7", tp::summarise_load(quiet, false), {}).empty());
  EXPECT_EQ(tp::judge_load_health("n7", tp::summarise_load(quiet, true), {}).size(), 1u);
}

TEST(LoadHealth, ABrakeThroughTheBusySamplesIsNotDilutedByIdleOnes) {
  // An accept: 90 idle samples, then 10 busy ones all held down by the HW power brake.
  tp::NvmlWatchRecord w = healthy_watch();
  for (int i = 0; i < 100; ++i) {
    w.samples[1][i] = busy(i < 90 ? 0 : tp::kClocksHwPowerBrake, 5, 16);
    w.samples[1][i].utilization_pct = i < 90 ? 0 : 100;
  }
  const tp::LoadHealth load = tp::summarise_load(w, false);
  EXPECT_EQ(load.gpus[1].reason_samples, 10);
  EXPECT_THAT(judged(w, {}, false),
              ElementsAre(HasSubstr("GPU 1 (GPU-101, 0000:19:00.0): clocks held down by HW power "
                                    "brake in 10 of 10 samples (100%)")));
}

TEST(Xids, OneXidSeenByNvmlAndTheKernelLogIsCountedOnce) {
  tp::DriverView driver;
  driver.gpus = {gpu(0), gpu(1)};
  const tp::XidEvent nvml = xid_event(79, "nvml", "", "GPU-101");
  const tp::XidEvent logged = xid_event(79, "kernel log", "0000:19:00");
  const auto findings = tp::judge_xids("n7", {nvml, logged}, {}, driver);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].reason,
            "n7: GPU 1 (GPU-101, 0000:19:00.0): XID 79, GPU has fallen off the bus (once, kernel "
            "log and nvml)");
}

TEST(LoadHealth, AWatchStuckInTheDriverIsTheNodesFailure) {
  tp::NvmlWatchRecord w = healthy_watch();
  w.stopped = false;
  EXPECT_THAT(judged(w), ElementsAre(HasSubstr("fail n7: the GPU driver: the NVML watch did not "
                                               "come back within its deadline")));
}

TEST(Xids, FatalFailsWarnWarnsAndAnApplicationsIsNoFinding) {
  tp::NvmlWatchRecord w = healthy_watch();
  w.xids = {{1, "GPU-101", "0000:19:00.0", 79, 12.0},
            {1, "GPU-101", "0000:19:00.0", 79, 13.0},
            {0, "GPU-100", "0000:18:00.0", 13, 14.0},
            {0, "GPU-100", "0000:18:00.0", 94, 15.0},
            {0, "GPU-100", "0000:18:00.0", 4242, 16.0}};
  EXPECT_THAT(judged(w),
              ElementsAre("fail n7: GPU 1 (GPU-101, 0000:19:00.0): XID 79, GPU has fallen off "
                          "the bus (2 times, nvml)",
                          HasSubstr("warn n7: GPU 0 (GPU-100, 0000:18:00.0): XID 94, contained "
                                    "ECC error"),
                          HasSubstr("warn n7: GPU 0 (GPU-100, 0000:18:00.0): XID 4242, not in "
                                    "trainproof's table (once, nvml)")));
  // The host file's [health] moves XIDs between classes.
  tp::LoadRules rules;
  rules.xids.application = {79};
  rules.xids.fatal = {13};
  EXPECT_THAT(judged(w, rules), ElementsAre(HasSubstr("fail n7: GPU 0 (GPU-100, 0000:18:00.0): "
                                                      "XID 13, graphics engine exception"),
                                            HasSubstr("XID 94"), HasSubstr("XID 4242")));
}

TEST(Xids, TheShippedTableFailsDcgmsFatalSetAndKnowsTheApplicationsOwn) {
  for (long long xid : {48, 64, 74, 79, 95, 119, 120, 140})
    EXPECT_EQ(tp::xid_rule(xid, {}).kind, tp::XidClass::fatal) << xid;
  for (long long xid : {13, 31, 43, 45})
    EXPECT_EQ(tp::xid_rule(xid, {}).kind, tp::XidClass::application) << xid;
  EXPECT_EQ(tp::xid_rule(999, {}).kind, tp::XidClass::unknown);
  for (const tp::XidRule& r : tp::shipped_xid_rules()) {
    EXPECT_FALSE(r.meaning.empty()) << r.xid;
    EXPECT_FALSE(r.action.empty()) << r.xid;
  }
}

TEST(KernelLog, XidsWithinTheWindowAreReadFromKmsgRecords) {
  const long long now_us = 9'000'000'000;  // 2.5 h after boot
  const std::string records =
      "6,901,1000000000,-;NVRM: Xid (PCI:0000:9a:00): 79, pid='<unknown>', name=<unknown>, GPU "
      "has fallen off the bus.\n"
      " SUBSYSTEM=pci\n"
      "4,902,8940000000,-;NVRM: Xid (PCI:0000:9A:00): 48, pid=1234, name=python, An uncorrectable "
      "double bit error (DBE) has been detected on GPU in the framebuffer at partition 6.\n"
      "6,903,8950000000,-;mlx5_core 0000:1a:00.0: Port module event: module 0, Cable plugged\n"
      "4,904,8990000000,c;NVRM: Xid (0000:18:00): 13, Graphics Exception: ESR 0x405840\n"
      "garbage line without a prefix NVRM: Xid (PCI:0000:18:00): 74, nothing\n";
  const std::vector<tp::XidEvent> xids = tp::kernel_log_xids(records, now_us, 7200);
  ASSERT_EQ(xids.size(), 2u);  // the 79 is 8,000 s old, past the 2 h window
  EXPECT_EQ(xids[0].xid, 48);
  EXPECT_EQ(xids[0].pci_address, "0000:9a:00");
  EXPECT_DOUBLE_EQ(xids[0].age_s, 60);
  EXPECT_EQ(xids[0].source, "kernel log");
  EXPECT_THAT(xids[0].text, HasSubstr("double bit error"));
  EXPECT_EQ(xids[1].xid, 13);
  EXPECT_EQ(xids[1].pci_address, "0000:18:00");
  EXPECT_EQ(tp::kernel_log_xids(records, now_us, 9000).size(), 3u);
}

TEST(KernelLog, AKernelLogXidIsNamedWithTheGpuAtItsAddress) {
  tp::DriverView driver;
  driver.gpus = {gpu(0), gpu(1)};
  tp::XidEvent x = xid_event(48, "kernel log", "0000:19:00");
  const auto findings = tp::judge_xids("n7", {x}, {}, driver);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].reason,
            "n7: GPU 1 (GPU-101, 0000:19:00.0): XID 48, double-bit ECC error (once, kernel log)");
  x.pci_address = "0000:c1:00";  // a GPU the driver no longer lists
  EXPECT_THAT(tp::judge_xids("n7", {x}, {}, driver)[0].reason,
              HasSubstr("n7: the GPU at PCI 0000:c1:00: XID 48"));
}

}  // namespace
