#include "node/load_health.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace tp {
namespace {

bool is_busy(const GpuHealth& h, bool busy_without_utilization) {
  return h.utilization_pct >= 0 ? h.utilization_pct >= kBusyUtilizationPct
                                : busy_without_utilization;
}

void count_reasons(GpuLoad& load, const GpuHealth& h) {
  ++load.reason_samples;
  if (h.clock_event_reasons < 0) return;
  const long long bits = h.clock_event_reasons;
  load.hw_slowdown += (bits & kClocksHwSlowdown) ? 1 : 0;
  load.hw_thermal += (bits & kClocksHwThermal) ? 1 : 0;
  load.hw_power_brake += (bits & kClocksHwPowerBrake) ? 1 : 0;
  load.sw_thermal += (bits & kClocksSwThermal) ? 1 : 0;
  load.sw_power_cap += (bits & kClocksSwPowerCap) ? 1 : 0;
}

void add_sample(GpuLoad& load, const GpuHealth& h, bool busy) {
  ++load.samples;
  load.hottest_c = std::max(load.hottest_c, h.temperature_c);
  load.peak_power_w = std::max(load.peak_power_w, h.power_w);
  if (h.sm_clock_mhz >= 0) {
    load.lowest_sm_clock_mhz = load.lowest_sm_clock_mhz < 0
                                   ? h.sm_clock_mhz
                                   : std::min(load.lowest_sm_clock_mhz, h.sm_clock_mhz);
    load.highest_sm_clock_mhz = std::max(load.highest_sm_clock_mhz, h.sm_clock_mhz);
  }
  // The fastest link while busy: a GPU lowers its link at rest, so one busy sample at full
  // speed shows the link can train there, and an idle one says nothing.
  if (!busy) return;
  ++load.busy_samples;
  if (h.pcie_gen > load.best_pcie_gen ||
      (h.pcie_gen == load.best_pcie_gen && h.pcie_width > load.best_pcie_width)) {
    load.best_pcie_gen = h.pcie_gen;
    load.best_pcie_width = h.pcie_width;
  }
}

// One GPU's samples: the clock reasons over its busy samples where it had any (hours of idle
// stages must not dilute a brake held through training), else over all of them.
GpuLoad summarise_gpu(const DriverGpu& gpu, const std::vector<GpuHealth>& samples,
                      bool busy_without_utilization) {
  GpuLoad g;
  g.gpu = gpu;
  for (const GpuHealth& h : samples) add_sample(g, h, is_busy(h, busy_without_utilization));
  for (const GpuHealth& h : samples)
    if (g.busy_samples == 0 || is_busy(h, busy_without_utilization)) count_reasons(g, h);
  return g;
}

struct LoadFindings {
  const std::string& host;
  std::vector<HealthFinding> out;
  void add(const char* status, const std::string& who, const std::string& what,
           const std::string& action) {
    out.push_back({status, host + ": " + who + ": " + what, action});
  }
};

std::string samples_share(int count, int samples) {
  char text[64];
  std::snprintf(text, sizeof text, "%d of %d samples (%.0f%%)", count, samples,
                100.0 * count / samples);
  return text;
}

void judge_load_clocks(LoadFindings& f, const GpuLoad& g, const LoadRules& rules) {
  if (g.reason_samples == 0) return;
  const std::string who = gpu_label(g.gpu);
  const auto over = [&](int count) { return count > rules.clock_event_share * g.reason_samples; };
  const std::pair<int, const char*> hardware[] = {{g.hw_slowdown, "HW slowdown"},
                                                  {g.hw_thermal, "HW thermal slowdown"},
                                                  {g.hw_power_brake, "HW power brake"}};
  for (const auto& [count, name] : hardware)
    if (over(count))
      f.add("fail", who,
            std::string("clocks held down by ") + name + " in " +
                samples_share(count, g.reason_samples) + " of the load",
            "drain the node; check the GPU's cooling, its power supply and the baseboard's "
            "power-brake signal");
  if (over(g.sw_thermal))
    f.add("warn", who,
          "clocks held down by SW thermal slowdown in " +
              samples_share(g.sw_thermal, g.reason_samples) + " of the load (hottest " +
              std::to_string(g.hottest_c) + " C)",
          "check the node's cooling and airflow");
}

void judge_busy_link(LoadFindings& f, const GpuLoad& g) {
  const DriverGpu& max = g.gpu;
  if (g.busy_samples == 0 || g.best_pcie_gen < 0 || max.max_pcie_gen < 0) return;
  const bool slow_gen = g.best_pcie_gen < max.max_pcie_gen;
  const bool narrow =
      max.max_pcie_width > 0 && g.best_pcie_width >= 0 && g.best_pcie_width < max.max_pcie_width;
  if (!slow_gen && !narrow) return;
  f.add("fail", gpu_label(g.gpu),
        "PCIe link at Gen" + std::to_string(g.best_pcie_gen) + " x" +
            std::to_string(g.best_pcie_width) + " while busy (its maximum: Gen" +
            std::to_string(max.max_pcie_gen) + " x" + std::to_string(max.max_pcie_width) + ")",
        "drain the node; reseat the GPU or its riser and check the slot's link settings in "
        "the BIOS");
}

// "GPU 3 (GPU-..., 0000:9a:00.0)" for an XID's GPU: by index and UUID from NVML, by address
// from the kernel log ("0000:9a:00", no function).
std::string xid_gpu(const XidEvent& x, const DriverView& driver) {
  for (const DriverGpu& g : driver.gpus)
    if ((!x.uuid.empty() && g.uuid == x.uuid) ||
        (!x.pci_address.empty() && g.pci_address.rfind(x.pci_address, 0) == 0))
      return gpu_label(g);
  if (x.gpu_index >= 0) return "GPU " + std::to_string(x.gpu_index);
  return "the GPU at PCI " + x.pci_address;
}

}  // namespace

LoadRules load_rules_of(const InventorySpec* spec) {
  LoadRules rules;
  if (!spec) return rules;
  if (spec->clock_event_share) rules.clock_event_share = *spec->clock_event_share;
  rules.xids = spec->xids;
  return rules;
}

LoadHealth summarise_load(const NvmlWatchRecord& watch, bool busy_without_utilization) {
  LoadHealth load;
  load.unavailable = watch.unavailable;
  load.events_unavailable = watch.events_unavailable;
  load.stopped = watch.stopped;
  load.seconds = watch.seconds;
  static const std::vector<GpuHealth> none;
  for (size_t k = 0; k < watch.gpus.size(); ++k)
    load.gpus.push_back(summarise_gpu(watch.gpus[k],
                                      k < watch.samples.size() ? watch.samples[k] : none,
                                      busy_without_utilization));
  for (const GpuXid& x : watch.xids) {
    XidEvent e;
    e.xid = x.xid;
    e.gpu_index = x.gpu_index;
    e.uuid = x.uuid;
    e.pci_address = x.pci_address;
    e.source = "nvml";
    e.text =
        "XID " + std::to_string(x.xid) + " at " + std::to_string(int(x.at_s)) + " s into the load";
    load.xids.push_back(e);
  }
  return load;
}

std::vector<HealthFinding> judge_xids(const std::string& host, const std::vector<XidEvent>& xids,
                                      const XidOverrides& overrides, const DriverView& driver) {
  // One finding per GPU and XID however often it came (an XID storm is one problem). The same
  // XID reaches NVML's events and the kernel log: its count is the larger source's, not the sum.
  std::map<std::pair<std::string, long long>, std::map<std::string, int>> seen;
  std::vector<std::pair<std::string, long long>> order;
  for (const XidEvent& x : xids) {
    const auto key = std::make_pair(xid_gpu(x, driver), x.xid);
    auto [it, fresh] = seen.emplace(key, std::map<std::string, int>{});
    if (fresh) order.push_back(key);
    ++it->second[x.source];
  }
  LoadFindings f{host, {}};
  for (const auto& key : order) {
    const XidRule rule = xid_rule(key.second, overrides);
    if (rule.kind == XidClass::application) continue;
    int count = 0;
    std::string sources;
    for (const auto& [source, n] : seen[key]) {
      count = std::max(count, n);
      sources += (sources.empty() ? "" : " and ") + source;
    }
    f.add(rule.kind == XidClass::fatal ? "fail" : "warn", key.first,
          "XID " + std::to_string(key.second) + ", " + rule.meaning +
              (count > 1 ? " (" + std::to_string(count) + " times" : " (once") + ", " + sources +
              ")",
          rule.action);
  }
  return f.out;
}

std::vector<HealthFinding> judge_load_health(const std::string& host, const LoadHealth& load,
                                             const LoadRules& rules) {
  LoadFindings f{host, {}};
  if (!load.stopped)
    f.add("fail", "the GPU driver",
          "the NVML watch did not come back within its deadline (the driver may be hung)",
          "drain the node and reboot it");
  for (const GpuLoad& g : load.gpus) {
    judge_load_clocks(f, g, rules);
    judge_busy_link(f, g);
  }
  return f.out;
}

}  // namespace tp
