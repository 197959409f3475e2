#include "app/report/node_actions.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "app/report/drain_lines.h"
#include "common/errors.h"

namespace tp {
namespace {

using nlohmann::json;

// The checks that flag nodes: a report without nodes[].findings (an older one) gives each of its
// node's reasons the worst of their statuses.
constexpr const char* kNodeChecks[] = {"pairwise_flags", "flagged_nodes", "min_straggler_score",
                                       "topology",       "inventory",     "gpu_health"};

const json& checks_of(const json& report) {
  static const json none = json::array();
  if (!report.contains("gate") || !report["gate"].is_object()) return none;
  const auto checks = report["gate"].find("checks");
  return checks != report["gate"].end() && checks->is_array() ? *checks : none;
}

// The worst status of the checks called `name`; "" when there is none.
std::string check_status(const json& report, const std::string& name) {
  std::string worst;
  for (const json& c : checks_of(report))
    if (c.is_object() && c.value("name", "") == name && c.contains("status") &&
        c["status"].is_string()) {
      const std::string status = c["status"];
      if (worst.empty() || status_rank(status) > status_rank(worst)) worst = status;
    }
  return worst;
}

std::string text_field(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

std::vector<NodeFinding> findings_of(const json& node, const json& report,
                                     const std::vector<std::string>& reasons) {
  std::vector<NodeFinding> findings;
  const auto listed = node.find("findings");
  if (listed != node.end() && listed->is_array() && !listed->empty()) {
    for (const json& f : *listed) {
      NodeFinding found{text_field(f, "check"), text_field(f, "status"), text_field(f, "reason"),
                        text_field(f, "summary")};
      if (found.status.empty()) found.status = check_status(report, found.check);
      if (found.status.empty()) found.status = "warn";
      findings.push_back(std::move(found));
    }
    return findings;
  }
  std::string status;
  for (const char* check : kNodeChecks) {
    const std::string s = check_status(report, check);
    if (status.empty() || status_rank(s) > status_rank(status)) status = s;
  }
  if (status_rank(status) == 0) status = "warn";
  for (const std::string& why : reasons) findings.push_back({"flagged", status, why, ""});
  if (findings.empty()) findings.push_back({"flagged", status, "flagged", ""});
  return findings;
}

struct NumberedHost {
  std::string prefix;
  std::string digits;  // the trailing digits, as written ("07")
};

NumberedHost split_number(const std::string& host) {
  size_t start = host.size();
  while (start > 0 && std::isdigit(static_cast<unsigned char>(host[start - 1])) != 0) --start;
  return {host.substr(0, start), host.substr(start)};
}

// "01-03,07" for the sorted numbers of one prefix and width.
std::string ranges_of(const std::vector<std::string>& digits) {
  std::string out;
  for (size_t i = 0; i < digits.size();) {
    size_t j = i;
    while (j + 1 < digits.size() && std::stoull(digits[j + 1]) == std::stoull(digits[j]) + 1) ++j;
    out += (out.empty() ? "" : ",") + digits[i] + (j > i ? "-" + digits[j] : "");
    i = j + 1;
  }
  return out;
}

std::string list_text(const std::vector<FlaggedNode>& nodes) {
  if (nodes.empty()) return "no node flagged\n";
  std::string out;
  for (const FlaggedNode& n : nodes) {
    std::string status = worst_finding(n).status;
    std::transform(status.begin(), status.end(), status.begin(), ::toupper);
    out += n.host + ": " + status + "\n";
    for (const NodeFinding& f : n.findings) {
      std::string s = f.status;
      std::transform(s.begin(), s.end(), s.begin(), ::toupper);
      out += "  - " + f.check + " " + s + ": " + f.reason + "\n";
    }
  }
  return out;
}

std::string json_text(const ReportNodes& report) {
  json list = json::array();
  std::vector<std::string> hosts;
  for (const FlaggedNode& n : report.flagged) {
    json findings = json::array();
    for (const NodeFinding& f : n.findings)
      findings.push_back({{"check", f.check}, {"status", f.status}, {"reason", f.reason}});
    list.push_back({{"host", n.host},
                    {"status", worst_finding(n).status},
                    {"check", worst_finding(n).check},
                    {"reasons", n.reasons},
                    {"findings", findings},
                    {"drain_reason", drain_reason(n, report.run_id)}});
    hosts.push_back(n.host);
  }
  return json{{"schema", "trainproof.nodes/1"},
              {"run_id", report.run_id.empty() ? json(nullptr) : json(report.run_id)},
              {"flagged", list},
              {"hostlist", hosts.empty() ? json(nullptr) : json(slurm_hostlist(hosts))}}
             .dump(2) +
         "\n";
}

}  // namespace

int status_rank(const std::string& status) {
  if (status == "fail") return 3;
  if (status == "incomplete") return 2;
  return status == "warn" ? 1 : 0;
}

const NodeFinding& worst_finding(const FlaggedNode& node) {
  static const NodeFinding none{"flagged", "warn", "flagged", ""};
  const NodeFinding* worst = node.findings.empty() ? &none : &node.findings.front();
  for (const NodeFinding& f : node.findings)
    if (status_rank(f.status) > status_rank(worst->status)) worst = &f;
  return *worst;
}

bool plain_host_name(const std::string& host) {
  return !host.empty() && std::all_of(host.begin(), host.end(), [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '.' || c == '_' || c == '-';
  });
}

ReportNodes report_nodes_of(const json& report) {
  ReportNodes out;
  if (report.contains("context")) out.run_id = text_field(report["context"], "run_id");
  for (const char* check : kNodeChecks) {
    const std::string s = check_status(report, check);
    out.judged = out.judged || (!s.empty() && s != "n/a");
  }
  const auto nodes = report.find("nodes");
  if (nodes == report.end() || !nodes->is_array()) return out;
  for (const json& n : *nodes) {
    if (!n.is_object() || !n.contains("host") || !n["host"].is_string()) continue;
    if (!n.value("flagged", false)) {
      out.passed.push_back(n["host"]);
      continue;
    }
    FlaggedNode node{n["host"].get<std::string>(), {}, {}};
    for (const json& reason : n.value("reasons", json::array()))
      if (reason.is_string()) node.reasons.push_back(reason.get<std::string>());
    node.findings = findings_of(n, report, node.reasons);
    out.flagged.push_back(std::move(node));
  }
  return out;
}

std::vector<FlaggedNode> flagged_nodes_of(const json& report) {
  return report_nodes_of(report).flagged;
}

std::string slurm_hostlist(std::vector<std::string> hosts) {
  std::sort(hosts.begin(), hosts.end());
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  // (prefix, width) -> numbers; the order of first appearance among the sorted names.
  std::vector<std::pair<std::string, size_t>> order;
  std::map<std::pair<std::string, size_t>, std::vector<std::string>> groups;
  std::vector<std::string> plain;
  for (const std::string& host : hosts) {
    const NumberedHost n = split_number(host);
    // Slurm reads a range only from digits; 19 of them still fit an unsigned 64-bit number.
    if (n.digits.empty() || n.digits.size() > 18 || !plain_host_name(host)) {
      order.push_back({host, 0});
      groups[{host, 0}] = {};
      continue;
    }
    const std::pair<std::string, size_t> key{n.prefix, n.digits.size()};
    if (!groups.count(key)) order.push_back(key);
    groups[key].push_back(n.digits);
  }
  std::string out;
  for (const auto& key : order) {
    std::vector<std::string>& digits = groups[key];
    std::sort(digits.begin(), digits.end());  // same width: text order is number order
    std::string part = key.first;
    if (digits.size() == 1) part += digits.front();
    if (digits.size() > 1) part += "[" + ranges_of(digits) + "]";
    out += (out.empty() ? "" : ",") + part;
  }
  return out;
}

std::string render_nodes(const ReportNodes& nodes, const std::string& format,
                         const std::string& min_status) {
  if (min_status != "fail" && min_status != "warn")
    throw UsageError("--min-status must be fail or warn, got '" + min_status + "'");
  if (format == "list") return list_text(nodes.flagged);
  if (format == "drain") return drain_text(nodes, min_status);
  if (format == "resume") return resume_text(nodes);
  if (format == "json") return json_text(nodes);
  if (format == "hostlist") {
    std::vector<std::string> hosts;
    for (const FlaggedNode& n : nodes.flagged) hosts.push_back(n.host);
    return hosts.empty() ? "" : slurm_hostlist(hosts) + "\n";
  }
  throw UsageError("--format must be list, hostlist, drain, resume or json, got '" + format + "'");
}

}  // namespace tp
