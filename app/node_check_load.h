#pragma once
// node-check's checks beyond the machine at rest (docs/node-check.md): the kernel log's XIDs of
// the look-back window at every level, and at level=full the burn with the NVML watch beside it,
// the counters before and after it, and each GPU's GEMM rate against its peers.
#include <string>

#include "app/node_check_report.h"
#include "node/inventory_spec.h"

namespace tp {

struct LoadCheckConfig {
  bool full = false;
  double burn_s = 60, sample_s = 1, xid_lookback_s = 7200;
  std::string kernel_log = "/dev/kmsg";
  std::string sysfs_root = "/sys";       // where each GPU's local CPUs are read
  const InventorySpec* rules = nullptr;  // the host file's [health] overrides
};

// Reads the kernel log's XIDs into `r`.
void check_kernel_log(const LoadCheckConfig& c, NodeCheckRecord& r);

// Burns, watching the GPUs, then reads the driver again; fills r.load, r.burn and their findings
// and judges every XID seen (r.xid_findings). Prints a line before and after the burn.
void check_under_load(const LoadCheckConfig& c, NodeCheckRecord& r);

}  // namespace tp
