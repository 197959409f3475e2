#include "node/health_change.h"

#include <algorithm>

namespace tp {
namespace {

// "3 (0 -> 3)": how much a counter rose, with both reads.
std::string rise(long long before, long long after) {
  return std::to_string(after - before) + " (" + std::to_string(before) + " -> " +
         std::to_string(after) + ")";
}

bool rose(long long before, long long after) {
  return before >= 0 && after > before;
}
bool became_set(int before, int after) {
  return before == 0 && after == 1;
}

const DriverGpu* same_gpu(const DriverView& view, const DriverGpu& wanted) {
  const auto found = std::find_if(view.gpus.begin(), view.gpus.end(), [&](const DriverGpu& g) {
    return wanted.uuid.empty() ? g.pci_address == wanted.pci_address : g.uuid == wanted.uuid;
  });
  return found == view.gpus.end() ? nullptr : &*found;
}

struct GpuChange {
  const std::string& host;
  const DriverGpu& gpu;
  const std::string& during;
  std::vector<HealthFinding>& out;
  void add(const char* status, const std::string& what, const char* action) {
    out.push_back({status, host + ": " + gpu_label(gpu) + ": " + what + " " + during, action});
  }
};

void judge_memory_change(GpuChange c, const GpuHealth& b, const GpuHealth& a) {
  constexpr const char* kReset = "drain the node and reset the GPU (nvidia-smi -r), then check it";
  if (rose(b.ecc_uncorrected_volatile, a.ecc_uncorrected_volatile))
    c.add("fail",
          "uncorrectable ECC errors rose by " +
              rise(b.ecc_uncorrected_volatile, a.ecc_uncorrected_volatile),
          "drain the node and reset the GPU; replace it if they come back");
  const long long pages_before =
      b.retired_sbe < 0 ? -1 : b.retired_sbe + std::max(b.retired_dbe, 0LL);
  const long long pages_after =
      a.retired_sbe < 0 ? -1 : a.retired_sbe + std::max(a.retired_dbe, 0LL);
  if (rose(pages_before, pages_after))
    c.add("fail", "retired pages rose by " + rise(pages_before, pages_after), kReset);
  if (rose(b.remapped_uncorrectable, a.remapped_uncorrectable))
    c.add("fail",
          "rows remapped for uncorrectable errors rose by " +
              rise(b.remapped_uncorrectable, a.remapped_uncorrectable),
          kReset);
  if (became_set(b.retired_pending, a.retired_pending))
    c.add("fail", "a page retirement became pending", kReset);
  if (became_set(b.remap_pending, a.remap_pending))
    c.add("fail", "a row remap became pending", kReset);
  if (became_set(b.remap_failed, a.remap_failed))
    c.add("fail", "a row remap failed (the memory has no spare row left)",
          "drain the node and replace the GPU");
}

void judge_link_change(GpuChange c, const DriverGpu& b, const DriverGpu& a) {
  if (b.nvlinks_up >= 0 && a.nvlinks_up >= 0 && a.nvlinks_up < b.nvlinks_up)
    c.add("fail",
          std::to_string(b.nvlinks_up - a.nvlinks_up) + " NVLink link(s) went down (" +
              std::to_string(b.nvlinks_up) + " -> " + std::to_string(a.nvlinks_up) + " up)",
          "drain the node and reset the GPUs; check the NVSwitch trays and the baseboard");
  const GpuHealth &hb = b.health, &ha = a.health;
  if (rose(hb.nvlink_recovery, ha.nvlink_recovery))
    c.add("fail", "NVLink recovery errors rose by " + rise(hb.nvlink_recovery, ha.nvlink_recovery),
          "drain the node; a link that retrains under load drops the job's collectives");
  if (rose(hb.nvlink_crc, ha.nvlink_crc))
    c.add("warn", "NVLink CRC errors rose by " + rise(hb.nvlink_crc, ha.nvlink_crc),
          "watch the link; replace the GPU or its baseboard if they keep rising");
  if (rose(hb.nvlink_replay, ha.nvlink_replay))
    c.add("warn", "NVLink replays rose by " + rise(hb.nvlink_replay, ha.nvlink_replay),
          "watch the link; replace the GPU or its baseboard if they keep rising");
  if (rose(hb.pcie_replays, ha.pcie_replays))
    c.add("warn", "PCIe replays rose by " + rise(hb.pcie_replays, ha.pcie_replays),
          "reseat the GPU and check its riser and slot; replace it if they keep rising");
}

// Per counter: the status a rise gives and what to do about it.
struct PortRule {
  const char* counter;
  const char* status;
  const char* action;
};
constexpr PortRule kPortRules[] = {
    {"link_downed", "fail", "check the cable, transceiver and switch port; drain if it repeats"},
    {"local_link_integrity_errors", "warn", "check the cable and transceiver"},
    {"symbol_error", "warn", "check the cable and transceiver; clean or replace them"},
    {"port_rcv_errors", "warn", "check the cable and transceiver"},
    {"excessive_buffer_overrun_errors", "warn", "check the switch port's flow control"},
    {"port_xmit_discards", "warn", "look for congestion at the switch port this NIC sends to"}};

long long counter(const RdmaPort& port, const char* name) {
  const auto found = port.counters.find(name);
  return found == port.counters.end() ? -1 : found->second;
}

}  // namespace

std::vector<HealthFinding> judge_gpu_change(const std::string& host, const DriverView& before,
                                            const DriverView& after, const std::string& during) {
  std::vector<HealthFinding> out;
  if (!before.loaded || !after.loaded) return out;  // nothing to compare (inventory names why)
  for (const DriverGpu& b : before.gpus) {
    const DriverGpu* a = same_gpu(after, b);
    if (!a) {
      out.push_back({"fail", host + ": " + gpu_label(b) + ": left the driver " + during,
                     "drain the node; read the kernel log for an XID (79: fallen off the bus) and "
                     "reboot; reseat the GPU if it comes back missing"});
      continue;
    }
    judge_memory_change({host, *a, during, out}, b.health, a->health);
    judge_link_change({host, *a, during, out}, b, *a);
  }
  return out;
}

std::string rails_of_device(const std::string& device, const std::vector<std::string>& rail_nics) {
  std::vector<size_t> rails;
  for (size_t k = 0; k < rail_nics.size(); ++k)
    if (!device.empty() && rail_nics[k] == device) rails.push_back(k);
  if (rails.empty()) return "";
  std::string text = rails.size() == 1 ? " (rail " : " (rails ";
  for (size_t i = 0; i < rails.size(); ++i)
    text += (i == 0 ? "" : i + 1 == rails.size() ? " and " : ", ") + std::to_string(rails[i]);
  return text + ")";
}

std::vector<HealthFinding> judge_port_change(const std::string& host,
                                             const std::vector<RdmaPort>& before,
                                             const std::vector<RdmaPort>& after,
                                             const std::vector<std::string>& rail_nics,
                                             const std::string& during) {
  std::vector<HealthFinding> out;
  for (const RdmaPort& a : after) {
    const auto b = std::find_if(before.begin(), before.end(), [&a](const RdmaPort& p) {
      return p.device == a.device && p.port == a.port;
    });
    if (b == before.end()) continue;
    const std::string name =
        host + ": " + a.device + " port " + a.port + rails_of_device(a.device, rail_nics);
    if (b->state == "ACTIVE" && a.state != "ACTIVE")
      out.push_back({"fail", name + ": went from ACTIVE to " + a.state + " " + during,
                     "drain the node; check the cable, transceiver and switch port"});
    for (const PortRule& rule : kPortRules)
      if (const long long was = counter(*b, rule.counter), now = counter(a, rule.counter);
          rose(was, now))
        out.push_back({rule.status,
                       name + ": " + rule.counter + " rose by " + rise(was, now) + " " + during,
                       rule.action});
  }
  return out;
}

}  // namespace tp
