#include "node/gpu_health.h"

#include <algorithm>

namespace tp {
namespace {

// "HW slowdown, HW thermal slowdown": the reasons of `bits` an operator acts on.
std::string clock_reasons(long long bits) {
  const std::pair<long long, const char*> names[] = {{kClocksHwSlowdown, "HW slowdown"},
                                                     {kClocksHwThermal, "HW thermal slowdown"},
                                                     {kClocksHwPowerBrake, "HW power brake"},
                                                     {kClocksSwThermal, "SW thermal slowdown"}};
  std::string text;
  for (const auto& [bit, name] : names)
    if (bits & bit) text += (text.empty() ? "" : ", ") + std::string(name);
  return text;
}

struct Findings {
  const std::string& host;
  std::vector<HealthFinding> out;
  void add(const char* status, const DriverGpu& g, const std::string& what, const char* action) {
    out.push_back({status, host + ": " + gpu_label(g) + ": " + what, action});
  }
};

void judge_memory(Findings& f, const DriverGpu& g) {
  const GpuHealth& h = g.health;
  if (h.remap_failed == 1)
    f.add("fail", g, "a row remap failed (the memory has no spare row left)",
          "drain the node and replace the GPU");
  if (h.remap_pending == 1)
    f.add("fail", g, "a row remap is pending (it takes effect at the next reset)",
          "drain the node and reset the GPU (nvidia-smi -r), then check it again");
  if (h.remapped_uncorrectable >= kMaxUncorrectableRemaps)
    f.add("fail", g,
          std::to_string(h.remapped_uncorrectable) +
              " rows remapped for uncorrectable errors (limit " +
              std::to_string(kMaxUncorrectableRemaps) + ")",
          "drain the node and replace the GPU");
  if (h.retired_pending == 1)
    f.add("fail", g, "a page retirement is pending (it takes effect at the next reset)",
          "drain the node and reset the GPU (nvidia-smi -r), then check it again");
  const long long retired = std::max(h.retired_sbe, 0LL) + std::max(h.retired_dbe, 0LL);
  if (retired >= kMaxRetiredPages)
    f.add(
        "fail", g,
        std::to_string(retired) + " pages retired (limit " + std::to_string(kMaxRetiredPages) + ")",
        "drain the node and replace the GPU");
  if (h.ecc_uncorrected_volatile > 0)
    f.add("fail", g,
          std::to_string(h.ecc_uncorrected_volatile) +
              " uncorrectable ECC error(s) since the last reset",
          "drain the node and reset the GPU; replace it if they come back");
}

void judge_clocks(Findings& f, const DriverGpu& g) {
  const long long bits = g.health.clock_event_reasons;
  if (bits < 0) return;
  // At rest no hardware reason should hold the clocks; SW power cap is normal under load and never
  // a finding (DCGM's clock-event failure mask).
  if (const std::string hw =
          clock_reasons(bits & (kClocksHwSlowdown | kClocksHwThermal | kClocksHwPowerBrake));
      !hw.empty())
    f.add("fail", g, "clocks held down by " + hw,
          "drain the node; check the GPU's cooling, its power supply and the baseboard's "
          "power-brake signal");
  else if (bits & kClocksSwThermal)
    f.add("warn", g,
          "clocks held down by SW thermal slowdown (" + std::to_string(g.health.temperature_c) +
              " C)",
          "check the node's cooling and airflow");
}

}  // namespace

std::vector<HealthFinding> judge_gpu_health(const std::string& host, const DriverView& driver) {
  Findings f{host, {}};
  for (const DriverGpu& g : driver.gpus) {
    judge_memory(f, g);
    judge_clocks(f, g);
  }
  return f.out;
}

}  // namespace tp
