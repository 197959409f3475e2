#include "app/node_check_load_report.h"

#include "app/report/gate.h"

namespace tp {
namespace {

using nlohmann::json;

json null_if_negative(int value) {
  return value < 0 ? json(nullptr) : json(value);
}
json null_if_negative(double value) {
  return value < 0 ? json(nullptr) : json(value);
}
json text_or_null(const std::string& text) {
  return text.empty() ? json(nullptr) : json(text);
}

json xid_event_json(const XidEvent& x) {
  return {{"xid", x.xid},
          {"source", x.source},
          {"gpu_index", null_if_negative(x.gpu_index)},
          {"uuid", text_or_null(x.uuid)},
          {"pci_address", text_or_null(x.pci_address)},
          {"age_s", null_if_negative(x.age_s)},
          {"text", x.text}};
}

json gpu_load_json(const GpuLoad& g) {
  return {{"index", g.gpu.index},
          {"uuid", g.gpu.uuid},
          {"pci_address", g.gpu.pci_address},
          {"samples", g.samples},
          {"busy_samples", g.busy_samples},
          {"reason_samples", g.reason_samples},
          {"clock_event_samples",
           {{"hw_slowdown", g.hw_slowdown},
            {"hw_thermal", g.hw_thermal},
            {"hw_power_brake", g.hw_power_brake},
            {"sw_thermal", g.sw_thermal},
            {"sw_power_cap", g.sw_power_cap}}},
          {"busy_pcie",
           {{"gen", null_if_negative(g.best_pcie_gen)},
            {"width", null_if_negative(g.best_pcie_width)}}},
          {"max_pcie",
           {{"gen", null_if_negative(g.gpu.max_pcie_gen)},
            {"width", null_if_negative(g.gpu.max_pcie_width)}}},
          {"hottest_c", null_if_negative(g.hottest_c)},
          {"peak_power_w", null_if_negative(g.peak_power_w)},
          {"sm_clock_mhz",
           {{"lowest", null_if_negative(g.lowest_sm_clock_mhz)},
            {"highest", null_if_negative(g.highest_sm_clock_mhz)}}}};
}

std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f", s);
  return text;
}

}  // namespace

// One check over a list of findings: FAIL if any fails, else WARN if any, else PASS.
json findings_check(const std::string& name, const std::vector<HealthFinding>& findings,
                    const std::string& pass_reason) {
  std::string status = "pass", reasons;
  for (const HealthFinding& f : findings) {
    if (f.status == "fail")
      status = "fail";
    else if (status == "pass")
      status = "warn";
    reasons += (reasons.empty() ? "" : "; ") + f.reason;
  }
  return gate_check(
      name, int(findings.size()), 0, status,
      findings.empty() ? pass_reason : std::to_string(findings.size()) + " finding(s): " + reasons);
}

json xids_json(const NodeCheckRecord& r) {
  json kernel = json::array(), during = json::array();
  for (const XidEvent& x : r.kernel_xids) kernel.push_back(xid_event_json(x));
  for (const XidEvent& x : r.load.xids) during.push_back(xid_event_json(x));
  return {{"lookback_s", r.xid_lookback_s},
          {"kernel_log", kernel},
          {"kernel_log_unreadable", text_or_null(r.kernel_log_unreadable)},
          {"during_load", r.under_load ? during : json(nullptr)},
          {"events_unavailable",
           r.under_load ? text_or_null(r.load.events_unavailable) : json(nullptr)}};
}

json load_json(const NodeCheckRecord& r) {
  if (!r.under_load) return nullptr;
  json gpus = json::array();
  for (const GpuLoad& g : r.load.gpus) gpus.push_back(gpu_load_json(g));
  return {{"seconds", r.load.seconds},
          {"unavailable", text_or_null(r.load.unavailable)},
          {"watch_stopped", r.load.stopped},
          {"gpus", gpus}};
}

json burn_json(const NodeCheckRecord& r) {
  if (!r.under_load) return nullptr;
  const BurnRecord& b = r.burn;
  json devices = json::array();
  for (const BurnDevice& d : b.devices)
    devices.push_back(
        {{"gpu", d.gpu < 0 ? json(nullptr) : json(d.gpu)},
         {"name", d.name},
         {"uuid", text_or_null(d.uuid)},
         {"pci_address", text_or_null(d.pci_address)},
         {"tflops", d.figure / 1e12},
         {"measurements", d.rates.size()},
         {"confirmed_tflops", d.confirmed < 0 ? json(nullptr) : json(d.confirmed / 1e12)},
         {"error", text_or_null(d.error)}});
  return {{"backend", b.backend},
          {"dtype", b.dtype},
          {"seconds", b.seconds},
          {"unavailable", text_or_null(b.unavailable)},
          {"why_cpu", text_or_null(b.why_cpu)},
          {"peer_median_tflops", b.peers.median},
          {"peer_noise", b.peers.noise},
          {"devices", devices}};
}

json copies_json(const NodeCheckRecord& r) {
  if (!r.under_load) return nullptr;
  const CopyRecord& c = r.copies;
  json devices = json::array(), pairs = json::array();
  for (const CopyDevice& d : c.devices)
    devices.push_back({{"gpu", d.gpu < 0 ? json(nullptr) : json(d.gpu)},
                       {"uuid", text_or_null(d.uuid)},
                       {"pci_address", text_or_null(d.pci_address)},
                       {"cpus", text_or_null(d.cpus)},
                       {"device_gbps", d.device_gbps},
                       {"h2d_gbps", d.gpu < 0 ? json(nullptr) : json(d.h2d_gbps)},
                       {"d2h_gbps", d.gpu < 0 ? json(nullptr) : json(d.d2h_gbps)},
                       {"error", text_or_null(d.error)}});
  for (const PeerCopy& p : c.pairs)
    pairs.push_back({{"source", p.source},
                     {"destination", p.destination},
                     {"gbps", p.gbps > 0 ? json(p.gbps) : json(nullptr)}});
  return {{"backend", c.backend},
          {"seconds", c.seconds},
          {"unavailable", text_or_null(c.unavailable)},
          {"devices", devices},
          {"pairs", pairs}};
}

json xid_check(const NodeCheckRecord& r) {
  const bool events = r.under_load && r.load.unavailable.empty() && r.load.stopped &&
                      r.load.events_unavailable.empty();
  if (!r.kernel_log_unreadable.empty() && !events && r.xid_findings.empty())
    return gate_check("xid", nullptr, nullptr, "n/a",
                      "the kernel log could not be read (" + r.kernel_log_unreadable + ")" +
                          (r.under_load ? " and NVML's XID events could not be watched" : ""));
  std::string where = r.kernel_log_unreadable.empty()
                          ? "the kernel log's last " + seconds_text(r.xid_lookback_s) + " s"
                          : "";
  if (events) where += std::string(where.empty() ? "" : " and ") + "NVML's events during the load";
  return findings_check("xid", r.xid_findings, "no XID in " + where);
}

json load_health_check(const NodeCheckRecord& r) {
  if (!r.under_load) return nullptr;
  if (!r.load.unavailable.empty() && r.load_findings.empty())
    return gate_check("load_health", nullptr, nullptr, "n/a",
                      "the GPUs were not watched: " + r.load.unavailable);
  if (r.load.gpus.empty() && r.load_findings.empty())
    return gate_check("load_health", nullptr, nullptr, "n/a", "the driver lists no GPU");
  return findings_check("load_health", r.load_findings,
                        "every one of " + std::to_string(r.load.gpus.size()) +
                            " GPU(s) ran at full clocks and link through the burn");
}

json gpu_burn_check(const NodeCheckRecord& r) {
  if (!r.under_load) return nullptr;
  if (!r.burn.unavailable.empty() && r.burn_findings.empty())
    return gate_check("gpu_burn", nullptr, nullptr, "n/a", "nothing burned: " + r.burn.unavailable);
  return findings_check("gpu_burn", r.burn_findings,
                        std::to_string(r.burn.devices.size()) + " device(s) burned (" +
                            r.burn.backend + "), none slow beside its peers");
}

json gpu_copies_check(const NodeCheckRecord& r) {
  if (!r.under_load) return nullptr;
  if (!r.copies.unavailable.empty() && r.copy_findings.empty())
    return gate_check("gpu_copies", nullptr, nullptr, "n/a",
                      "nothing measured: " + r.copies.unavailable);
  return findings_check("gpu_copies", r.copy_findings,
                        std::to_string(r.copies.devices.size()) + " device(s) and " +
                            std::to_string(r.copies.pairs.size()) + " pair(s) measured (" +
                            r.copies.backend + "), none slow beside its peers");
}

}  // namespace tp
