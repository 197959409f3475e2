#pragma once
// What an XID says about a GPU (docs/node-check.md, "XID events"). The NVIDIA driver logs an XID
// for each error it sees on a GPU, as "NVRM: Xid (PCI:0000:9a:00): 79, pid=..., GPU has fallen off
// the bus" in the kernel log and as an NVML event. Some name the hardware (the GPU must leave
// service), some an application's own fault (recorded, not held against the node). The shipped
// table follows DCGM's health mapping; a host file's [health] section moves XIDs between classes.
#include <string>
#include <vector>

namespace tp {

enum class XidClass { fatal, warn, application, unknown };

struct XidRule {
  long long xid = 0;
  XidClass kind = XidClass::unknown;
  std::string meaning;  // "GPU has fallen off the bus"
  std::string action;   // "drain the node and reboot it; replace the GPU if it recurs"
};

// The host file's [health] overrides: each list moves its XIDs into that class.
struct XidOverrides {
  std::vector<long long> fatal, warn, application;
};

// The rule for `xid` under `overrides`; an XID the table does not know is `unknown` (a WARN:
// investigate) unless an override names it.
XidRule xid_rule(long long xid, const XidOverrides& overrides);

// The shipped table, for docs/node-check.md and its test.
const std::vector<XidRule>& shipped_xid_rules();

// One XID the driver reported.
struct XidEvent {
  long long xid = 0;
  std::string pci_address;  // as the kernel log names the GPU: "0000:9a:00" (no function)
  int gpu_index = -1;       // the driver's index, where the source gives one (NVML)
  std::string uuid;
  std::string source;  // "nvml" (during the load) or "kernel log" (the look-back window)
  double age_s = -1;   // kernel log: seconds before the read
  std::string text;    // the log line's message, for the report
};

// The XIDs of /dev/kmsg's records ("6,1234,5678901234,-;NVRM: Xid (PCI:0000:9a:00): 79, ...")
// logged within `lookback_s` of `now_us` (the reader's CLOCK_MONOTONIC in microseconds, the clock
// the kernel stamps its records with). Lines of other shapes are skipped.
std::vector<XidEvent> kernel_log_xids(const std::string& records, long long now_us,
                                      double lookback_s);

}  // namespace tp
