#pragma once
// What an operator does about flagged nodes (docs/report.md, "Node actions"): the list of every
// node any check flagged, with its reasons, and the same as Slurm's compressed host list (for
// `--exclude`), as `scontrol update ... State=DRAIN` lines with NHC-style reasons, as the lines
// that resume the nodes trainproof drained once a run passes them, or as JSON. trainproof prints
// these; it never runs them.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tp {

// One reason a node was flagged, with the check that flagged it and the status it takes: the
// finding's own (a pairwise flag is FAIL or WARN by itself), else its check's in gate.checks[]
// (a gate threshold may have made a straggler FAIL).
struct NodeFinding {
  std::string check;   // a gate.checks[] name; "flagged" for a report without nodes[].findings
  std::string status;  // "fail", "warn", or the check's other status ("pass", ...)
  std::string reason;
  std::string summary;  // the figures an operator reads first; "" when the reason is all
};

struct FlaggedNode {
  std::string host;
  std::vector<std::string> reasons;   // worst first, as the report lists them
  std::vector<NodeFinding> findings;  // one per reason, in the same order
};

// The nodes of one report: its run (context.run_id, "" when it has none), the flagged ones, and
// those it judged and did not flag.
struct ReportNodes {
  std::string run_id;
  std::vector<FlaggedNode> flagged;
  std::vector<std::string> passed;
  bool judged = false;  // some check that flags nodes measured something (its status is not n/a)
};

ReportNodes report_nodes_of(const nlohmann::json& report);
// Every node of report.nodes[] that a check flagged, in the report's order.
std::vector<FlaggedNode> flagged_nodes_of(const nlohmann::json& report);

// 3 for fail, 2 for incomplete, 1 for warn, 0 for anything else.
int status_rank(const std::string& status);
// The node's worst finding: the first of the worst status.
const NodeFinding& worst_finding(const FlaggedNode& node);

// Slurm's compressed notation: gpu-node-01, -02, -03, -07 -> "gpu-node-[01-03,07]". Names that
// end in digits of the same width and share the rest fold into one range list; others stay as
// they are. scontrol show hostnames expands it back to exactly `hosts`.
std::string slurm_hostlist(std::vector<std::string> hosts);

// A name scontrol takes as it is: letters, digits, '.', '_' and '-'.
bool plain_host_name(const std::string& host);

// The formats of `trainproof report nodes`: list, hostlist, drain, resume, json. drain prints the
// nodes whose worst finding is at least `min_status` ("fail" or "warn"); resume the nodes the
// report passed (app/report/drain_lines.h).
std::string render_nodes(const ReportNodes& nodes, const std::string& format,
                         const std::string& min_status = "fail");

}  // namespace tp
