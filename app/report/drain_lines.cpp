#include "app/report/drain_lines.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <vector>

#include "app/report/shell_text.h"

namespace tp {
namespace {

using nlohmann::json;

constexpr size_t kDrainReasonChars = 128;  // NHC's limit, which Slurm's reason field keeps

// One line without the characters that would need quoting inside a reason (quotes, backslashes,
// backticks) or end it (control characters), runs of spaces as one.
std::string one_line(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    const bool unsafe = std::iscntrl(c) != 0 || c == '"' || c == '\'' || c == '\\' || c == '`';
    const char kept = unsafe ? ' ' : char(c);
    if (kept == ' ' && (out.empty() || out.back() == ' ')) continue;
    out += kept;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// `text` at most `chars` long, cut on a whole UTF-8 character and ending in "..." when cut.
std::string cut_to(const std::string& text, size_t chars) {
  if (text.size() <= chars) return text;
  if (chars < 3) return "";
  size_t cut = chars - 3;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + "...";
}

// The reason without the node's name in front ("vc-n3: send ..." -> "send ..."): the drain line
// names the node already, and the name would take the room of the verdict.
std::string without_host(const std::string& reason, const std::string& host) {
  if (host.empty() || reason.compare(0, host.size(), host) != 0) return reason;
  size_t at = host.size();
  if (at < reason.size() && reason[at] != ':' && reason[at] != ' ') return reason;
  while (at < reason.size() && (reason[at] == ':' || reason[at] == ' ')) ++at;
  return at < reason.size() ? reason.substr(at) : reason;
}

std::string upper(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), ::toupper);
  return text;
}

std::string left_out(const std::string& host) {
  return "# left out: host name '" + comment_text(host) + "' is not one scontrol takes as it is\n";
}

}  // namespace

std::string drain_reason(const FlaggedNode& node, const std::string& run_id) {
  const NodeFinding& worst = worst_finding(node);
  const std::string head =
      one_line(kDrainReasonPrefix + worst.check + " " + upper(worst.status)) + ": ";
  const std::string detail = one_line(without_host(worst.reason, node.host));
  std::string body = worst.summary.empty() ? detail : one_line(worst.summary);
  const size_t others = std::max(node.findings.size(), size_t(1)) - 1;
  if (others > 0) body += " (+" + std::to_string(others) + " more)";
  if (!worst.summary.empty() && !detail.empty()) body += "; " + detail;
  std::string run = run_id.empty() ? "" : " run=" + one_line(run_id);
  // The run id goes only where it leaves the detail some room; the check and verdict always fit.
  if (head.size() + run.size() + 16 > kDrainReasonChars) run.clear();
  return cut_to(head + body, kDrainReasonChars - run.size()) + run;
}

std::string drain_text(const ReportNodes& nodes, const std::string& min_status) {
  std::string out;
  for (const FlaggedNode& n : nodes.flagged) {
    if (status_rank(worst_finding(n).status) < status_rank(min_status)) continue;
    if (!plain_host_name(n.host)) {
      out += left_out(n.host);
      continue;
    }
    out += "scontrol update NodeName=" + n.host +
           " State=DRAIN Reason=" + shell_word(drain_reason(n, nodes.run_id)).value() + "\n";
  }
  return out;
}

std::string resume_text(const ReportNodes& nodes) {
  if (!nodes.judged)
    return "# no line: this report judged no node (every check that flags nodes is n/a)\n";
  std::string out;
  for (const std::string& host : nodes.passed) {
    if (!plain_host_name(host)) {
      out += left_out(host);
      continue;
    }
    out += "case \"$(sinfo -h -N -n " + host + " -o %E)\" in '" + kDrainReasonPrefix +
           "'*) scontrol update NodeName=" + host + " State=RESUME ;; esac\n";
  }
  return out;
}

std::string node_action_lines(const json& report, const std::string& report_path) {
  const ReportNodes nodes = report_nodes_of(report);
  if (nodes.flagged.empty()) return "";
  std::vector<std::string> hosts;
  size_t failing = 0;
  for (const FlaggedNode& n : nodes.flagged) {
    hosts.push_back(n.host);
    failing += status_rank(worst_finding(n).status) >= status_rank("fail");
  }
  const size_t warning = nodes.flagged.size() - failing;
  std::string out = "nodes to act on (" + std::to_string(nodes.flagged.size()) +
                    "): " + slurm_hostlist(hosts) + "\n";
  const std::optional<std::string> path = shell_word(report_path);
  if (!path)
    return out +
           "  the report's path holds a control character, so it is not printed here; "
           "its drain lines: trainproof report nodes REPORT --format=drain\n";
  const std::string command = "trainproof report nodes " + *path + " --format=drain";
  if (failing > 0)
    out += "  their drain lines (" + std::to_string(failing) + " FAIL): " + command + "\n";
  if (warning > 0)
    out += "  " + std::string(failing > 0 ? "with the " : "the ") + std::to_string(warning) +
           " WARN: " + command + " --min-status=warn\n";
  return out;
}

}  // namespace tp
