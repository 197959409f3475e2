#pragma once
// The shell lines `report nodes` prints for Slurm (docs/report.md, "Node actions"): DRAIN with a
// reason that `sinfo -R` and `scontrol show node` show the check and verdict of first, RESUME for
// the nodes trainproof itself drained, and the summary's pointer to them. Every line is safe to
// paste: each word that is not plain is single-quoted, and what cannot be one line is left out
// with a comment that says so.
#include <nlohmann/json.hpp>
#include <string>

#include "app/report/node_actions.h"

namespace tp {

// What every reason trainproof writes starts with: the resume lines act only on nodes whose
// reason does, as NHC re-onlines only the nodes it drained itself.
inline constexpr const char* kDrainReasonPrefix = "trainproof: ";

// One drain line's reason: "trainproof: CHECK STATUS: " and the worst finding's summary (else its
// reason without the node's name), "(+N more)" when the node has other findings, "; " and the
// reason when a summary came first, then " run=RUN_ID"; one line without quotes, backslashes or
// control characters, at most 128 characters, the detail cut (ending in "...") before the check,
// the verdict or the run id is.
std::string drain_reason(const FlaggedNode& node, const std::string& run_id);

// `scontrol update NodeName=H State=DRAIN Reason='...'` for each flagged node at `min_status` or
// worse; a host name scontrol would not take as it is gets a comment line instead.
std::string drain_text(const ReportNodes& nodes, const std::string& min_status);

// For each node the report passed: a line that sets it to RESUME only when its reason starts with
// kDrainReasonPrefix, read at the time it runs (`sinfo -h -N -n H -o %E`). A report that judged
// no node prints a comment and no line.
std::string resume_text(const ReportNodes& nodes);

// The summary's closing lines when nodes were flagged: the host list and the commands that print
// the drain lines for `report_path` (the FAIL nodes', and with --min-status=warn the WARN ones'
// too); "" when none was.
std::string node_action_lines(const nlohmann::json& report, const std::string& report_path);

}  // namespace tp
