#pragma once
// Judges what a node's GPUs did during a load (docs/node-check.md, "Health during a load"): the
// clock-event reasons accumulated over the samples, the PCIe link while the GPU was busy, and the
// XIDs raised, from the NVML watch (gpu/nvml_watch.h) and the kernel log's look-back window. A
// counter read before and after the load is judged by node/health_change.h; what only shows while
// the GPU works (a throttle, a link that trains down under load) is judged here.
#include <string>
#include <vector>

#include "gpu/nvml_watch.h"
#include "node/gpu_health.h"
#include "node/inventory_spec.h"
#include "node/xid_rules.h"

namespace tp {

// One GPU's load, summed over the watch's samples.
struct GpuLoad {
  DriverGpu gpu;  // identity and maxima (PCIe, SM clock) as the watch found them
  int samples = 0;
  // The samples the clock reasons were counted over: the busy ones, or every one for a GPU
  // never busy; and those in which each reason held the clocks (docs/node-check.md names the
  // bits).
  int reason_samples = 0;
  int hw_slowdown = 0, hw_thermal = 0, hw_power_brake = 0, sw_thermal = 0, sw_power_cap = 0;
  // Samples in which the GPU was busy: the driver saw a kernel run in at least half its last
  // period (kBusyUtilizationPct), or, where it does not say, the load was known to keep it busy.
  int busy_samples = 0;
  int best_pcie_gen = -1, best_pcie_width = -1;  // the fastest link seen while busy
  int hottest_c = -1;
  double peak_power_w = -1;
  int lowest_sm_clock_mhz = -1, highest_sm_clock_mhz = -1;
};

struct LoadHealth {
  std::string unavailable;         // why the GPUs were not watched
  std::string events_unavailable;  // why NVML's XID events were not
  std::string kernel_log_unreadable;
  bool stopped = true;  // false: the watch did not come back from the driver in time
  double seconds = 0;
  double lookback_s = 0;  // the kernel log's window
  std::vector<GpuLoad> gpus;
  std::vector<XidEvent> xids;  // NVML's during the load, then the kernel log's
};

// The health rules a host file's [health] section may change.
struct LoadRules {
  double clock_event_share = 0.05;  // a reason in more of the samples than this is a finding
  XidOverrides xids;
};

inline constexpr int kBusyUtilizationPct = 50;

// The rules a host file's [health] section gives (its defaults where `spec` is null or silent).
LoadRules load_rules_of(const InventorySpec* spec);

// Sums the watch's samples per GPU and names its XIDs (source "nvml"). A sample without the
// driver's utilization counts as busy when `busy_without_utilization` (node-check's burn loads
// every GPU; accept's stages may leave a GPU idle).
LoadHealth summarise_load(const NvmlWatchRecord& watch, bool busy_without_utilization);

// The XIDs of `xids` as findings, one per GPU and XID (with its count), named with the GPU the
// driver lists at that address where it lists one. An application's XID is no finding.
std::vector<HealthFinding> judge_xids(const std::string& host, const std::vector<XidEvent>& xids,
                                      const XidOverrides& overrides, const DriverView& driver);

// Clock reasons held for more than the rules' share of the samples (HW slowdown, HW thermal, HW
// power brake: FAIL; SW thermal: WARN; SW power cap: never), a link below its maximum in every
// busy sample (FAIL; a GPU never busy is not judged), a watch stuck in the driver (FAIL). The
// load's XIDs are judge_xids's.
std::vector<HealthFinding> judge_load_health(const std::string& host, const LoadHealth& load,
                                             const LoadRules& rules);

}  // namespace tp
