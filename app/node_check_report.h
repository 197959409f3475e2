#pragma once
// node-check's record and its reporters (docs/node-check.md): the JSON report, whose nodes[] and
// gate.checks[] are those every report has (so report nodes, --junit and --metrics read it as
// any other), and the lines it prints, the last in NHC's form.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "node/burn.h"
#include "node/copy_bandwidth.h"
#include "node/gpu_health.h"
#include "node/inventory_judge.h"
#include "node/load_health.h"
#include "node/machine_facts.h"

namespace tp {

struct NodeCheckRecord {
  std::string run_id, started, level, host_file;
  MachineFacts machine;
  std::vector<MountFacts> mounts;
  DriverView driver;
  std::vector<InventoryItem> inventory;
  std::vector<HealthFinding> health;
  // XIDs: the kernel log's look-back window, and (level=full) NVML's events during the burn.
  std::vector<XidEvent> kernel_xids;
  std::string kernel_log_unreadable;
  double xid_lookback_s = 0;
  std::vector<HealthFinding> xid_findings;
  // level=full: the burn, what the GPUs did during it, and what changed across it.
  bool under_load = false;
  LoadHealth load;
  DriverView driver_after;
  std::vector<HealthFinding> load_findings;
  BurnRecord burn;
  std::vector<HealthFinding> burn_findings;
  CopyRecord copies;  // memory, host and peer copy rates
  std::vector<HealthFinding> copy_findings;
  std::vector<std::string> warnings;  // context.warnings: what makes the record less than real
};

nlohmann::json node_check_report(const NodeCheckRecord& record);
// The gpu_health check: n/a without a driver to ask or a GPU, else the worst finding's status
// with every finding's reason.
nlohmann::json gpu_health_check(const std::vector<HealthFinding>& findings,
                                const DriverView& driver);
// One line per FAIL or WARN finding, then "HOST | Healthy" or "HOST | ERROR: trainproof: CHECK:
// REASON" with the worst finding, as NHC ends (its last line is what Slurm's health check and an
// operator read first).
std::string node_check_text(const nlohmann::json& report);

}  // namespace tp
