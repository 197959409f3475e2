#include "app/node_check_report.h"

#include "app/cli/build_info.h"
#include "app/node_check_load_report.h"
#include "app/report/gate.h"
#include "app/report/node_actions.h"

namespace tp {
namespace {

using nlohmann::json;

json pcie_json(const PcieLink& l) {
  return {{"gen", l.gen}, {"max_gen", l.max_gen}, {"width", l.width}, {"max_width", l.max_width}};
}

json machine_json(const MachineFacts& m, const std::vector<MountFacts>& mounts) {
  json gpus = json::array(), ports = json::array(), mounted = json::array();
  for (const PciGpu& g : m.pci_gpus)
    gpus.push_back({{"pci_address", g.address},
                    {"device_id", g.device_id},
                    {"driver", g.driver},
                    {"numa_node", g.numa_node},
                    {"pcie", pcie_json(g.link)}});
  for (const RdmaPort& p : m.rdma_ports)
    ports.push_back({{"device", p.device},
                     {"port", p.port},
                     {"state", p.state},
                     {"phys_state", p.phys_state},
                     {"link_layer", p.link_layer},
                     {"rate_gbps", p.rate_gbps < 0 ? json(nullptr) : json(p.rate_gbps)},
                     {"rate", p.rate_text},
                     {"pci_address", p.pci_address},
                     {"numa_node", p.numa_node},
                     {"pcie", pcie_json(p.link)},
                     {"counters", p.counters}});
  for (const MountFacts& f : mounts)
    mounted.push_back({{"path", f.path},
                       {"mounted", f.mounted},
                       {"free_gb", f.free_gb < 0 ? json(nullptr) : json(f.free_gb)}});
  return {{"host", m.host},
          {"cpu_model", m.cpu_model},
          {"cpus", m.cpus},
          {"memory_gb", m.memory_gb},
          {"pci_gpus", gpus},
          {"rdma_ports", ports},
          {"interfaces_up", m.interfaces_up},
          {"mounts", mounted}};
}

json or_null(long long value) {
  return value < 0 ? json(nullptr) : json(value);
}
json or_null(double value) {
  return value < 0 ? json(nullptr) : json(value);
}

json health_json(const GpuHealth& h) {
  return {{"ecc_corrected_volatile", or_null(h.ecc_corrected_volatile)},
          {"ecc_uncorrected_volatile", or_null(h.ecc_uncorrected_volatile)},
          {"ecc_corrected_aggregate", or_null(h.ecc_corrected_aggregate)},
          {"ecc_uncorrected_aggregate", or_null(h.ecc_uncorrected_aggregate)},
          {"retired_sbe", or_null(h.retired_sbe)},
          {"retired_dbe", or_null(h.retired_dbe)},
          {"retired_pending", or_null((long long)h.retired_pending)},
          {"remapped_correctable", or_null(h.remapped_correctable)},
          {"remapped_uncorrectable", or_null(h.remapped_uncorrectable)},
          {"remap_pending", or_null((long long)h.remap_pending)},
          {"remap_failed", or_null((long long)h.remap_failed)},
          {"clock_event_reasons", or_null(h.clock_event_reasons)},
          {"temperature_c", or_null((long long)h.temperature_c)},
          {"power_w", or_null(h.power_w)},
          {"power_limit_w", or_null(h.power_limit_w)},
          {"sm_clock_mhz", or_null((long long)h.sm_clock_mhz)},
          {"max_sm_clock_mhz", or_null((long long)h.max_sm_clock_mhz)},
          {"pcie_gen", or_null((long long)h.pcie_gen)},
          {"pcie_width", or_null((long long)h.pcie_width)},
          {"pcie_replays", or_null(h.pcie_replays)},
          {"utilization_pct", or_null((long long)h.utilization_pct)},
          {"nvlink_replay", or_null(h.nvlink_replay)},
          {"nvlink_recovery", or_null(h.nvlink_recovery)},
          {"nvlink_crc", or_null(h.nvlink_crc)}};
}

json driver_json(const DriverView& d) {
  json gpus = json::array();
  for (const DriverGpu& g : d.gpus)
    gpus.push_back({{"index", g.index},
                    {"name", g.name},
                    {"uuid", g.uuid},
                    {"pci_address", g.pci_address},
                    {"device_id", g.device_id},
                    {"memory_gb", g.memory_gb},
                    {"vbios", g.vbios},
                    {"ecc", or_null((long long)g.ecc)},
                    {"mig", or_null((long long)g.mig)},
                    {"persistence", or_null((long long)g.persistence)},
                    {"nvlinks_up", or_null((long long)g.nvlinks_up)},
                    {"max_pcie_gen", or_null((long long)g.max_pcie_gen)},
                    {"max_pcie_width", or_null((long long)g.max_pcie_width)},
                    {"health", health_json(g.health)}});
  return {{"loaded", d.loaded},
          {"unavailable", d.loaded ? json(nullptr) : json(d.unavailable)},
          {"driver_version", d.driver_version},
          {"cuda_driver_version", d.cuda_driver_version},
          {"nccl_version", d.nccl_version.empty() ? json(nullptr) : json(d.nccl_version)},
          {"nvlink_pairs", or_null((long long)d.nvlink_pairs)},
          {"gpus", gpus}};
}

// The one gate check of the inventory: FAIL naming every failed item, PASS when every item given
// holds, n/a when the host file states no inventory.
json inventory_check(const std::vector<InventoryItem>& items, const std::string& host_file) {
  int failed = 0, judged = 0;
  std::string reasons;
  for (const InventoryItem& i : items) {
    if (i.status == "n/a") continue;
    ++judged;
    if (i.status != "fail") continue;
    ++failed;
    reasons += (reasons.empty() ? "" : "; ") + i.reason;
  }
  if (judged == 0)
    return gate_check(
        "inventory", nullptr, nullptr, "n/a",
        host_file.empty()
            ? "no --gate.file: no inventory to judge"
            : "gate.file '" + host_file + "' has no [inventory] key this host can be judged on");
  const std::string of =
      std::to_string(judged) + " inventory item(s) of gate.file '" + host_file + "'";
  return gate_check("inventory", failed, 0, failed ? "fail" : "pass",
                    failed ? std::to_string(failed) + " of " + of + " not met: " + reasons
                           : "all " + of + " met");
}

}  // namespace

json gpu_health_check(const std::vector<HealthFinding>& findings, const DriverView& driver) {
  if (!driver.loaded)
    return gate_check("gpu_health", nullptr, nullptr, "n/a",
                      "the driver could not be asked: " + driver.unavailable);
  if (driver.gpus.empty())
    return gate_check("gpu_health", nullptr, nullptr, "n/a", "the driver lists no GPU");
  return findings_check("gpu_health", findings,
                        "every one of " + std::to_string(driver.gpus.size()) + " GPU(s) healthy");
}

json node_check_report(const NodeCheckRecord& r) {
  json items = json::array(), findings = json::array(), reasons = json::array();
  for (const InventoryItem& i : r.inventory) {
    items.push_back({{"key", i.key},
                     {"expected", i.expected},
                     {"found", i.found},
                     {"status", i.status},
                     {"reason", i.reason.empty() ? json(nullptr) : json(i.reason)},
                     {"action", i.action.empty() ? json(nullptr) : json(i.action)}});
    if (i.status != "fail") continue;
    findings.push_back(node_finding("inventory", i.reason, "fail",
                                    i.key + ": " + i.found + ", expected " + i.expected));
    findings.back()["action"] = i.action;
    reasons.push_back(i.reason);
  }
  const std::pair<const char*, const std::vector<HealthFinding>*> health[] = {
      {"gpu_health", &r.health},
      {"xid", &r.xid_findings},
      {"load_health", &r.load_findings},
      {"gpu_burn", &r.burn_findings},
      {"gpu_copies", &r.copy_findings}};
  for (const auto& [check, list] : health)
    for (const HealthFinding& f : *list) {
      findings.push_back(node_finding(check, f.reason, f.status));
      findings.back()["action"] = f.action;
      reasons.push_back(f.reason);
    }
  json checks = json::array({inventory_check(r.inventory, r.host_file),
                             gpu_health_check(r.health, r.driver), xid_check(r)});
  if (r.under_load) {
    checks.push_back(load_health_check(r));
    checks.push_back(gpu_burn_check(r));
    checks.push_back(gpu_copies_check(r));
  }
  json report = {
      {"schema", kReportSchema},
      {"verdict", verdict_of_checks(checks)},
      {"context",
       {{"run_id", r.run_id},
        {"subcommand", "node-check"},
        {"started", r.started},
        {"host_file", r.host_file},
        {"warnings", r.warnings},
        {"trainproof", {{"version", build::kVersion}, {"git_revision", build::kGitRevision}}}}},
      {"node_check",
       {{"level", r.level},
        {"inventory", items},
        {"machine", machine_json(r.machine, r.mounts)},
        {"driver", driver_json(r.driver)},
        {"driver_after_load", r.under_load ? driver_json(r.driver_after) : json(nullptr)},
        {"xids", xids_json(r)},
        {"load", load_json(r)},
        {"burn", burn_json(r)},
        {"copies", copies_json(r)}}},
      {"nodes", json::array({{{"host", r.machine.host},
                              {"flagged", !findings.empty()},
                              {"reasons", reasons},
                              {"findings", findings}}})},
      {"gate", {{"checks", checks}}}};
  return report;
}

std::string node_check_text(const json& report) {
  const std::string host = report["nodes"][0].value("host", "");
  std::string out;
  for (const json& f : report["nodes"][0]["findings"]) {
    const std::string status = f.value("status", "fail") == "fail" ? "FAIL " : "WARN ";
    out += status + f.value("check", "") + ": " + f.value("reason", "") +
           "\n  action: " + f.value("action", "") + "\n";
  }
  const ReportNodes nodes = report_nodes_of(report);
  if (nodes.flagged.empty() ||
      status_rank(worst_finding(nodes.flagged.front()).status) < status_rank("fail"))
    return out + host + " | Healthy\n";
  const NodeFinding& worst = worst_finding(nodes.flagged.front());
  std::string reason = worst.reason;
  if (reason.rfind(host + ": ", 0) == 0) reason.erase(0, host.size() + 2);
  return out + host + " | ERROR: trainproof: " + worst.check + ": " + reason + "\n";
}

}  // namespace tp
