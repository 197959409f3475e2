#include "node/xid_rules.h"

#include <algorithm>
#include <cstdlib>
#include <regex>
#include <sstream>

namespace tp {
namespace {

constexpr const char* kDrainReset =
    "drain the node and reset the GPU (nvidia-smi -r); replace it if the XID comes back";

// DCGM's XID health mapping (its FAIL set is the fatal class here), with NVIDIA's XID catalogue
// for the meanings; the application class is what DCGM, GCM and NVSentinel agree is a program's
// own fault.
std::vector<XidRule> build_table() {
  const XidClass F = XidClass::fatal, W = XidClass::warn, A = XidClass::application;
  return {
      {13, A, "graphics engine exception, usually the application's own fault",
       "look at the application that ran; the GPU is not suspect unless it recurs across jobs"},
      {31, A, "GPU memory page fault, usually an illegal address in the application",
       "look at the application that ran; the GPU is not suspect unless it recurs across jobs"},
      {43, A, "GPU stopped processing; an application was stopped", "none for the node"},
      {45, A, "preemptive cleanup after an earlier error; a process ended", "none for the node"},
      {48, F, "double-bit ECC error", kDrainReset},
      {61, W, "internal micro-controller breakpoint or warning",
       "investigate; reset the GPU at the next drain if it recurs"},
      {62, W, "internal micro-controller halt", "drain the node and reset the GPU"},
      {63, W, "a page retirement or row remap was recorded",
       "reset the GPU at the next drain to apply the repair"},
      {64, F, "a page retirement or row remap could not be recorded",
       "drain the node and replace the GPU"},
      {74, F, "NVLink error",
       "drain the node, reset the GPU and check its NVLink links and the fabric manager; "
       "replace the baseboard if it recurs"},
      {79, F, "GPU has fallen off the bus",
       "drain the node and reboot it; replace the GPU or its riser if it recurs"},
      {92, W, "high single-bit ECC error rate",
       "watch the GPU's ECC counters; drain if they climb"},
      {94, W, "contained ECC error; the application that hit it was stopped",
       "reset the GPU at the next drain"},
      {95, F, "uncontained ECC error", kDrainReset},
      {119, F, "GSP firmware RPC timeout",
       "drain the node and reset the GPU; reboot if the reset fails"},
      {120, F, "GSP firmware error", "drain the node and reset the GPU; reboot if the reset fails"},
      {140, F, "unrecovered ECC error", kDrainReset},
      {154, W, "the driver changed the GPU's recovery action",
       "follow the recovery action nvidia-smi -q shows for the GPU"},
  };
}

bool listed(const std::vector<long long>& list, long long xid) {
  return std::find(list.begin(), list.end(), xid) != list.end();
}

}  // namespace

const std::vector<XidRule>& shipped_xid_rules() {
  static const std::vector<XidRule> table = build_table();
  return table;
}

XidRule xid_rule(long long xid, const XidOverrides& overrides) {
  XidRule rule{xid, XidClass::unknown, "not in trainproof's table",
               "investigate: look the XID up in NVIDIA's XID catalogue"};
  for (const XidRule& shipped : shipped_xid_rules())
    if (shipped.xid == xid) rule = shipped;
  const XidClass before = rule.kind;
  if (listed(overrides.fatal, xid)) rule.kind = XidClass::fatal;
  if (listed(overrides.warn, xid)) rule.kind = XidClass::warn;
  if (listed(overrides.application, xid)) rule.kind = XidClass::application;
  if (rule.kind != before) {
    rule.action = rule.kind == XidClass::fatal ? kDrainReset
                  : rule.kind == XidClass::warn
                      ? "investigate (the host file's [health] makes this XID a warning)"
                      : "none for the node (the host file's [health] makes it an application's)";
  }
  return rule;
}

std::vector<XidEvent> kernel_log_xids(const std::string& records, long long now_us,
                                      double lookback_s) {
  // The kernel's own prefix, then the driver's: "NVRM: Xid (PCI:0000:9a:00): 79, pid=..., ...".
  // Drivers before R470 wrote the address without "PCI:".
  static const std::regex record(R"(^\d+,\d+,(\d+),[^;]*;(.*)$)");
  static const std::regex xid(R"(NVRM: Xid \((?:PCI:)?([0-9a-fA-F:.]+)\): (\d+),?\s*(.*))");
  std::vector<XidEvent> found;
  std::istringstream lines(records);
  std::string line;
  std::smatch r, x;
  while (std::getline(lines, line)) {
    if (!std::regex_match(line, r, record)) continue;
    const std::string message = r[2].str();
    if (!std::regex_search(message, x, xid)) continue;
    const double age_s = double(now_us - std::strtoll(r[1].str().c_str(), nullptr, 10)) / 1e6;
    if (age_s > lookback_s) continue;
    XidEvent e;
    e.xid = std::strtoll(x[2].str().c_str(), nullptr, 10);
    e.pci_address = x[1].str();
    std::transform(e.pci_address.begin(), e.pci_address.end(), e.pci_address.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    e.source = "kernel log";
    e.age_s = std::max(age_s, 0.0);
    e.text = message.substr(0, 240);
    found.push_back(e);
  }
  return found;
}

}  // namespace tp
