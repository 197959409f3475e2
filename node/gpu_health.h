#pragma once
// Judges each GPU's health from one read of its driver (docs/node-check.md, "GPU health"), with
// the rules NVIDIA's DCGM applies in its quick diagnostic and its health watches: a memory repair
// pending or failed, uncorrectable errors since the last reset, too many retired pages or
// uncorrectable row remaps, and clocks held down by hardware. Each finding names its GPU and
// what to do; the figures at rest (temperature, power, clocks, link, lifetime counters) are
// recorded for the report, not judged.
#include <string>
#include <vector>

#include "gpu/driver_view.h"

namespace tp {

struct HealthFinding {
  std::string status;  // "fail" or "warn"
  std::string reason;  // "gpu-node-07: GPU 3 (GPU-..., 0000:48:00.0): a row remap is pending"
  std::string action;
};

// NVML's clocks-event reason bits (nvml.h).
inline constexpr long long kClocksSwPowerCap = 0x4, kClocksHwSlowdown = 0x8,
                           kClocksSwThermal = 0x20, kClocksHwThermal = 0x40,
                           kClocksHwPowerBrake = 0x80;
// DCGM's limits (DcgmGPUHardwareLimits.h): pages retired, and uncorrectable row remaps.
inline constexpr long long kMaxRetiredPages = 63, kMaxUncorrectableRemaps = 512;

std::vector<HealthFinding> judge_gpu_health(const std::string& host, const DriverView& driver);

}  // namespace tp
