#pragma once
// Reads the kernel log's records for the XIDs of a look-back window (docs/node-check.md, "XID
// events"), as NHC's and Azure's checks read syslog, but from /dev/kmsg: no syslog daemon or log
// rotation in between, and each record stamped with the kernel's own clock.
#include <string>

namespace tp {

struct KernelLog {
  std::string records;     // /dev/kmsg's records, one per line
  long long now_us = 0;    // CLOCK_MONOTONIC at the read, in the records' unit
  std::string unreadable;  // why it could not be read ("" when it was)
};

// Every record /dev/kmsg (or `path`, a file of such records, in tests) holds now, without
// blocking. A host with kernel.dmesg_restrict and no CAP_SYSLOG answers EPERM: that is
// `unreadable`.
KernelLog read_kernel_log(const std::string& path = "/dev/kmsg");

}  // namespace tp
