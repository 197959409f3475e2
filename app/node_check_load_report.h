#pragma once
// The parts of a node-check report beyond the machine at rest (docs/node-check.md, "XID events",
// "Health during a load", "The burn"): their JSON under node_check, and their gate checks.
#include <nlohmann/json.hpp>

#include "app/node_check_report.h"

namespace tp {

// node_check.xids: the kernel log's look-back window and NVML's events during a load.
nlohmann::json xids_json(const NodeCheckRecord& r);
// node_check.load: what each GPU did during the burn (null at level=quick).
nlohmann::json load_json(const NodeCheckRecord& r);
// node_check.burn: each device's GEMM rate and the peer judgement (null at level=quick).
nlohmann::json burn_json(const NodeCheckRecord& r);

// node_check.copies: each device's memory and host copy rates, every GPU pair's (null at
// level=quick).
nlohmann::json copies_json(const NodeCheckRecord& r);

// One check over a list of findings: FAIL if any fails, else WARN if any, else PASS with
// `pass_reason`.
nlohmann::json findings_check(const std::string& name, const std::vector<HealthFinding>& findings,
                              const std::string& pass_reason);

// The `xid` check: FAIL for a fatal XID, WARN for one to look into, n/a where neither the kernel
// log nor NVML's events could be read.
nlohmann::json xid_check(const NodeCheckRecord& r);
// The `load_health` check (level=full): clocks and PCIe link while busy, what rose across the
// burn; n/a where the driver could not be asked.
nlohmann::json load_health_check(const NodeCheckRecord& r);
// The `gpu_burn` check (level=full): each device's GEMM rate against its peers.
nlohmann::json gpu_burn_check(const NodeCheckRecord& r);
// The `gpu_copies` check (level=full): each copy rate against its peers, every pair's peer path.
nlohmann::json gpu_copies_check(const NodeCheckRecord& r);

}  // namespace tp
