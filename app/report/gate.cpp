// The verdict shared by every report kind (docs/report.md, "Verdict"): checks with a status, the
// verdict they give, and its exit code.
#include "app/report/gate.h"

#include "common/errors.h"

namespace tp {

using nlohmann::json;

json gate_check(const std::string& name, json value, json threshold, const std::string& status,
                const std::string& reason) {
  return {{"name", name},
          {"value", value},
          {"threshold", threshold},
          {"status", status},
          {"reason", reason}};
}

json node_finding(const std::string& check, const std::string& reason, const std::string& status,
                  const std::string& summary) {
  json finding = {{"check", check}, {"reason", reason}};
  if (!status.empty()) finding["status"] = status;
  if (!summary.empty()) finding["summary"] = summary;
  return finding;
}

json topology_check(const std::map<std::string, std::vector<std::string>>& reasons, bool measured) {
  if (!measured)
    return gate_check("topology", nullptr, 0, "n/a",
                      "preflight.topology=false: no node's topology was read");
  std::string hosts;
  for (const auto& [host, why] : reasons) hosts += (hosts.empty() ? "" : ", ") + host;
  return gate_check("topology", reasons.size(), 0, hosts.empty() ? "pass" : "warn",
                    hosts.empty() ? "no node differs from the majority or has a degraded link"
                                  : "flagged: " + hosts);
}

std::string report_kind(const json& report) {
  if (report.contains("accept")) return "accept";
  if (report.contains("drill")) return "drill";
  if (report.contains("train")) return "train";
  if (report.contains("node_check")) return "node-check";
  return report.contains("sweep") ? "sweep" : "report";
}

std::string stage_of_check(const json& check, const json& report) {
  if (check.contains("stage") && check["stage"].is_string()) return check["stage"];
  const std::string name = check.value("name", "");
  const std::string base = name.substr(0, name.find('.'));
  const json* thresholds = nullptr;
  if (report.contains("gate") && report["gate"].contains("thresholds"))
    thresholds = &report["gate"]["thresholds"];
  if (thresholds && thresholds->is_array())
    for (const json& t : *thresholds)
      if (t.value("check", "") == base && t.contains("stage")) return t["stage"];
  if (base == "drill" || base == "max_rto_s" || base == "max_rpo_steps") return "drill";
  const std::string kind = report_kind(report);
  return kind == "accept" ? "gate" : kind;
}

std::string verdict_of_checks(const json& checks) {
  std::string verdict = "PASS";
  bool judged = false;  // some check measured something: all "n/a" is no verdict at all
  bool incomplete = false;
  for (const auto& c : checks) {
    if (c["status"] == "fail") return "FAIL";
    if (c["status"] == "none") verdict = "NONE";
    if (c["status"] == "warn" && verdict == "PASS") verdict = "WARN";
    incomplete = incomplete || c["status"] == "incomplete";
    judged = judged || c["status"] != "n/a";
  }
  if (incomplete) return "INCOMPLETE";
  return judged || checks.empty() ? verdict : "NONE";
}

int exit_code_for(const std::string& verdict) {
  return verdict == "FAIL" || verdict == "INCOMPLETE" ? kExitFail : kExitPass;
}

}  // namespace tp
