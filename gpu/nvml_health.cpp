// One read of a GPU's health through NVML (docs/node-check.md, "GPU health"). Every getter here
// works without root; a GPU or driver that does not report one leaves its field -1.
#include <algorithm>
#include <initializer_list>

#include "gpu/nvml_library.h"

namespace tp {
namespace {

// nvml.h's enumerations, by value.
constexpr int kCorrected = 0, kUncorrected = 1;                        // nvmlMemoryErrorType_t
constexpr int kVolatile = 0, kAggregate = 1;                           // nvmlEccCounterType_t
constexpr int kMultipleSingleBit = 0, kDoubleBit = 1;                  // nvmlPageRetirementCause_t
constexpr int kTemperatureGpu = 0;                                     // nvmlTemperatureSensors_t
constexpr int kClockSm = 1;                                            // nvmlClockType_t
constexpr int kReplay = 0, kRecovery = 1, kCrcFlit = 2, kCrcData = 3;  // nvmlNvLinkErrorCounter_t
constexpr NvmlReturn kInsufficientSize = 7;

long long ecc(const Nvml& n, NvmlDevice d, int type, int counter) {
  unsigned long long count = 0;
  return n.total_ecc && n.total_ecc(d, type, counter, &count) == kNvmlSuccess
             ? static_cast<long long>(count)
             : -1;
}

// The count of pages retired for `cause`: asked with an empty buffer, NVML answers the count,
// with INSUFFICIENT_SIZE when there are any.
long long retired(const Nvml& n, NvmlDevice d, int cause) {
  unsigned count = 0;
  if (!n.retired_pages) return -1;
  const NvmlReturn code = n.retired_pages(d, cause, &count, nullptr);
  return code == kNvmlSuccess || code == kInsufficientSize ? static_cast<long long>(count) : -1;
}

int unsigned_of(NvmlReturn (*call)(NvmlDevice, unsigned*), NvmlDevice d) {
  unsigned value = 0;
  return call && call(d, &value) == kNvmlSuccess ? int(value) : -1;
}

int clock_of(NvmlReturn (*call)(NvmlDevice, int, unsigned*), NvmlDevice d) {
  unsigned mhz = 0;
  return call && call(d, kClockSm, &mhz) == kNvmlSuccess ? int(mhz) : -1;
}

// A counter summed over the GPU's links; -1 when no link reports it.
long long nvlink_sum(const Nvml& n, NvmlDevice d, std::initializer_list<int> counters) {
  if (!n.nvlink_errors) return -1;
  long long sum = -1;
  for (unsigned link = 0; link < kNvlinkMaxLinks; ++link)
    for (int counter : counters) {
      unsigned long long value = 0;
      if (n.nvlink_errors(d, link, counter, &value) == kNvmlSuccess)
        sum = std::max(sum, 0LL) + static_cast<long long>(value);
    }
  return sum;
}

}  // namespace

GpuHealth read_gpu_health(const Nvml& n, NvmlDevice d) {
  GpuHealth h;
  h.ecc_corrected_volatile = ecc(n, d, kCorrected, kVolatile);
  h.ecc_uncorrected_volatile = ecc(n, d, kUncorrected, kVolatile);
  h.ecc_corrected_aggregate = ecc(n, d, kCorrected, kAggregate);
  h.ecc_uncorrected_aggregate = ecc(n, d, kUncorrected, kAggregate);
  h.retired_sbe = retired(n, d, kMultipleSingleBit);
  h.retired_dbe = retired(n, d, kDoubleBit);
  int pending = 0;
  if (n.retired_pending && n.retired_pending(d, &pending) == kNvmlSuccess)
    h.retired_pending = pending ? 1 : 0;
  unsigned corrected = 0, uncorrected = 0, remap_pending = 0, failed = 0;
  if (n.remapped_rows &&
      n.remapped_rows(d, &corrected, &uncorrected, &remap_pending, &failed) == kNvmlSuccess) {
    h.remapped_correctable = corrected;
    h.remapped_uncorrectable = uncorrected;
    h.remap_pending = remap_pending ? 1 : 0;
    h.remap_failed = failed ? 1 : 0;
  }
  unsigned long long reasons = 0;
  if (n.clock_events && n.clock_events(d, &reasons) == kNvmlSuccess)
    h.clock_event_reasons = static_cast<long long>(reasons);
  unsigned celsius = 0;
  if (n.temperature && n.temperature(d, kTemperatureGpu, &celsius) == kNvmlSuccess)
    h.temperature_c = int(celsius);
  if (const int mw = unsigned_of(n.power_usage, d); mw >= 0) h.power_w = mw / 1000.0;
  if (const int mw = unsigned_of(n.power_limit, d); mw >= 0) h.power_limit_w = mw / 1000.0;
  h.sm_clock_mhz = clock_of(n.clock, d);
  h.max_sm_clock_mhz = clock_of(n.max_clock, d);
  h.pcie_gen = unsigned_of(n.pcie_gen, d);
  h.pcie_width = unsigned_of(n.pcie_width, d);
  h.pcie_replays = unsigned_of(n.pcie_replays, d);
  if (NvmlUtilization u{}; n.utilization && n.utilization(d, &u) == kNvmlSuccess)
    h.utilization_pct = int(u.gpu);
  h.nvlink_replay = nvlink_sum(n, d, {kReplay});
  h.nvlink_recovery = nvlink_sum(n, d, {kRecovery});
  h.nvlink_crc = nvlink_sum(n, d, {kCrcFlit, kCrcData});
  return h;
}

}  // namespace tp
