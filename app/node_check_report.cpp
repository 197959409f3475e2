#include "app/node_check_report.h"

#include "app/cli/build_info.h"
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

json driver_json(const DriverView& d) {
  json gpus = json::array();
  for (const DriverGpu& g : d.gpus)
    gpus.push_back({{"index", g.index},
                    {"name", g.name},
                    {"uuid", g.uuid},
                    {"pci_address", g.pci_address},
                    {"memory_gb", g.memory_gb}});
  return {{"loaded", d.loaded},
          {"unavailable", d.loaded ? json(nullptr) : json(d.unavailable)},
          {"driver_version", d.driver_version},
          {"cuda_driver_version", d.cuda_driver_version},
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
  json checks = json::array({inventory_check(r.inventory, r.host_file)});
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
        {"driver", driver_json(r.driver)}}},
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
  for (const json& item : report["node_check"]["inventory"])
    if (item["status"] == "fail")
      out += "FAIL " + item["key"].get<std::string>() + ": " + item["reason"].get<std::string>() +
             "\n  action: " + item["action"].get<std::string>() + "\n";
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
