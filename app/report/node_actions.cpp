#include "app/report/node_actions.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "common/errors.h"

namespace tp {
namespace {

using nlohmann::json;

constexpr size_t kDrainReasonChars = 128;  // NHC's limit, which Slurm's reason field keeps

// A name scontrol takes as it is: letters, digits, '.', '_' and '-'.
bool plain_host_name(const std::string& host) {
  return !host.empty() && std::all_of(host.begin(), host.end(), [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '.' || c == '_' || c == '-';
  });
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
    out += n.host + "\n";
    for (const std::string& reason : n.reasons) out += "  - " + reason + "\n";
  }
  return out;
}

std::string drain_text(const std::vector<FlaggedNode>& nodes) {
  std::string out;
  for (const FlaggedNode& n : nodes)
    out += plain_host_name(n.host)
               ? "scontrol update NodeName=" + n.host + " State=DRAIN Reason=\"" + drain_reason(n) +
                     "\"\n"
               : "# left out: host name '" + n.host + "' is not one scontrol takes as it is\n";
  return out;
}

std::string json_text(const std::vector<FlaggedNode>& nodes) {
  json list = json::array();
  std::vector<std::string> hosts;
  for (const FlaggedNode& n : nodes) {
    list.push_back({{"host", n.host}, {"reasons", n.reasons}, {"drain_reason", drain_reason(n)}});
    hosts.push_back(n.host);
  }
  return json{{"schema", "trainproof.nodes/1"},
              {"flagged", list},
              {"hostlist", nodes.empty() ? json(nullptr) : json(slurm_hostlist(hosts))}}
             .dump(2) +
         "\n";
}

}  // namespace

std::vector<FlaggedNode> flagged_nodes_of(const json& report) {
  std::vector<FlaggedNode> flagged;
  const auto nodes = report.find("nodes");
  if (nodes == report.end() || !nodes->is_array()) return flagged;
  for (const json& n : *nodes) {
    if (!n.is_object() || !n.value("flagged", false) || !n.contains("host")) continue;
    FlaggedNode node{n["host"].get<std::string>(), {}};
    for (const json& reason : n.value("reasons", json::array()))
      if (reason.is_string()) node.reasons.push_back(reason.get<std::string>());
    flagged.push_back(std::move(node));
  }
  return flagged;
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

std::string drain_reason(const FlaggedNode& node) {
  std::string why = node.reasons.empty() ? "flagged" : node.reasons.front();
  if (node.reasons.size() > 1) why += " (and " + std::to_string(node.reasons.size() - 1) + " more)";
  std::string text = "trainproof: ";
  for (unsigned char c : why) {
    const bool unsafe = std::iscntrl(c) != 0 || c == '"' || c == '\'' || c == '\\' || c == '`';
    const char kept = unsafe ? ' ' : char(c);
    if (kept == ' ' && !text.empty() && text.back() == ' ') continue;
    text += kept;
  }
  if (text.size() <= kDrainReasonChars) return text;
  size_t cut = kDrainReasonChars - 3;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // whole UTF-8
  return text.substr(0, cut) + "...";
}

std::string render_nodes(const std::vector<FlaggedNode>& nodes, const std::string& format) {
  if (format == "list") return list_text(nodes);
  if (format == "drain") return drain_text(nodes);
  if (format == "json") return json_text(nodes);
  if (format == "hostlist") {
    std::vector<std::string> hosts;
    for (const FlaggedNode& n : nodes) hosts.push_back(n.host);
    return hosts.empty() ? "" : slurm_hostlist(hosts) + "\n";
  }
  throw UsageError("--format must be list, hostlist, drain or json, got '" + format + "'");
}

std::string node_action_lines(const json& report, const std::string& report_path) {
  const std::vector<FlaggedNode> nodes = flagged_nodes_of(report);
  if (nodes.empty()) return "";
  std::vector<std::string> hosts;
  for (const FlaggedNode& n : nodes) hosts.push_back(n.host);
  const bool plain = std::all_of(report_path.begin(), report_path.end(), [](unsigned char c) {
    return std::isalnum(c) != 0 || std::string("/._-+:,=@").find(char(c)) != std::string::npos;
  });
  const std::string path = plain ? report_path : "'" + report_path + "'";
  return "nodes to act on (" + std::to_string(nodes.size()) + "): " + slurm_hostlist(hosts) +
         "\n  their drain lines: trainproof report nodes " + path + " --format=drain\n";
}

}  // namespace tp
