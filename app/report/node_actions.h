#pragma once
// What an operator does about flagged nodes (docs/report.md, "Node actions"): the list of every
// node any check flagged, with its reasons, and the same as Slurm's compressed host list (for
// `--exclude`), as `scontrol update ... State=DRAIN` lines with NHC-style reasons, or as JSON.
// trainproof prints these; it never runs them.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tp {

struct FlaggedNode {
  std::string host;
  std::vector<std::string> reasons;  // worst first, as the report lists them
};

// Every node of report.nodes[] that a check flagged, in the report's order.
std::vector<FlaggedNode> flagged_nodes_of(const nlohmann::json& report);

// Slurm's compressed notation: gpu-node-01, -02, -03, -07 -> "gpu-node-[01-03,07]". Names that
// end in digits of the same width and share the rest fold into one range list; others stay as
// they are. scontrol show hostnames expands it back to exactly `hosts`.
std::string slurm_hostlist(std::vector<std::string> hosts);

// One drain line's reason, as NHC writes them: "trainproof: " and the node's first reason (with
// how many more), on one line, without quotes, backslashes or control characters, at most 128
// characters, ending in "..." when cut.
std::string drain_reason(const FlaggedNode& node);

// The formats of `trainproof report nodes`: list, hostlist, drain, json.
std::string render_nodes(const std::vector<FlaggedNode>& nodes, const std::string& format);

// The summary's closing lines when nodes were flagged: the host list and the one command that
// prints the drain lines for `report_path`; "" when none was.
std::string node_action_lines(const nlohmann::json& report, const std::string& report_path);

}  // namespace tp
