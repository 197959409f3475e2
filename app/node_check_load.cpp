#include "app/node_check_load.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "gpu/nvml.h"
#include "gpu/nvml_watch.h"
#include "node/health_change.h"
#include "node/kernel_log.h"

namespace tp {
namespace {

std::string rate_text(double flops) {
  char text[48];
  if (flops >= 1e12)
    std::snprintf(text, sizeof text, "%.1f TFLOP/s", flops / 1e12);
  else
    std::snprintf(text, sizeof text, "%.2f GFLOP/s", flops / 1e9);
  return text;
}

void print_copies(const CopyRecord& copies) {
  char text[160];
  for (const CopyDevice& d : copies.devices) {
    if (!d.error.empty()) continue;  // print_burn names a failed device
    if (d.gpu < 0)
      std::snprintf(text, sizeof text, "  the CPU: memory copy %.1f GB/s\n", d.device_gbps);
    else
      std::snprintf(text, sizeof text,
                    "  GPU %d: memory copy %.0f GB/s, host to device %.1f GB/s, device to host "
                    "%.1f GB/s\n",
                    d.gpu, d.device_gbps, d.h2d_gbps, d.d2h_gbps);
    std::cout << text;
  }
  if (!copies.pairs.empty()) {
    double low = copies.pairs.front().gbps, high = low;
    for (const PeerCopy& p : copies.pairs)
      low = std::min(low, p.gbps), high = std::max(high, p.gbps);
    std::snprintf(text, sizeof text, "  peer copies: %zu pair(s), %.1f to %.1f GB/s\n",
                  copies.pairs.size(), low, high);
    std::cout << text;
  }
  std::cout << std::flush;
}

void print_burn(const BurnRecord& burn) {
  for (const BurnDevice& d : burn.devices) {
    std::cout << "  " << burn_device_label(d) << ": ";
    if (!d.error.empty())
      std::cout << "failed: " << d.error << "\n";
    else
      std::cout << rate_text(d.figure) << " " << burn.dtype << " GEMM, " << d.rates.size()
                << " measurement(s)"
                << (d.confirmed >= 0 ? ", measured again: " + rate_text(d.confirmed) : "") << "\n";
  }
  std::cout << std::flush;
}

// What changed across the burn: the counters of every GPU, and a driver that stopped answering.
std::vector<HealthFinding> change_findings(const std::string& host, const DriverView& before,
                                           const DriverView& after) {
  if (!before.loaded) return {};
  if (!after.loaded)
    return {{"fail",
             host + ": the GPU driver stopped answering during the burn: " + after.unavailable,
             "drain the node and reboot it"}};
  return judge_gpu_change(host, before, after);
}

}  // namespace

void check_kernel_log(const LoadCheckConfig& c, NodeCheckRecord& r) {
  const KernelLog log = read_kernel_log(c.kernel_log);
  r.xid_lookback_s = c.xid_lookback_s;
  r.kernel_log_unreadable = log.unreadable;
  r.kernel_xids = kernel_log_xids(log.records, log.now_us, c.xid_lookback_s);
  std::vector<XidEvent> all = r.kernel_xids;
  all.insert(all.end(), r.load.xids.begin(), r.load.xids.end());
  r.xid_findings = judge_xids(r.machine.host, all, load_rules_of(c.rules).xids, r.driver);
}

void check_under_load(const LoadCheckConfig& c, NodeCheckRecord& r) {
  const std::string& host = r.machine.host;
  const auto started = std::chrono::steady_clock::now();
  std::cout << "node-check: burning for " << c.burn_s << " s (GEMM on every GPU, or the CPU), "
            << "reading every GPU each " << c.sample_s << " s" << std::endl;
  NvmlWatch watch(c.sample_s);
  r.burn = run_burn(host, burn_options_of(c.burn_s, c.rules));
  // The copies run inside the watch too: host-to-device copies load each PCIe link fully.
  r.copies = run_copy_bandwidth(
      host, copy_options_of(c.burn_s, c.rules, c.sysfs_root, r.driver.every_pair_nvlink()));
  r.copy_findings = r.copies.findings;
  // A read of every GPU takes milliseconds; a watch that has not come back in this long is
  // stuck in the driver.
  const NvmlWatchRecord watched = watch.stop(std::max(10.0, 4 * c.sample_s));
  // Never ask a driver the watch is stuck in again: that read would hang node-check too.
  if (watched.stopped)
    r.driver_after = read_nvml();
  else
    r.driver_after.unavailable = "not asked again: the NVML watch is stuck in the driver";
  r.load = summarise_load(watched, true);
  r.under_load = true;
  print_burn(r.burn);
  print_copies(r.copies);
  const LoadRules rules = load_rules_of(c.rules);
  r.load_findings = judge_load_health(host, r.load, rules);
  if (watched.stopped) {
    const auto changed = change_findings(host, r.driver, r.driver_after);
    r.load_findings.insert(r.load_findings.end(), changed.begin(), changed.end());
  }
  r.burn_findings = burn_findings(host, r.burn, r.burn.why_cpu.empty());
  // The kernel log after the load: its window now covers the burn and the copies too, and the
  // XIDs NVML's events did not deliver.
  LoadCheckConfig after = c;
  after.xid_lookback_s =
      c.xid_lookback_s +
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  check_kernel_log(after, r);
}

}  // namespace tp
