#pragma once
// What a sweep prints: its rows as nccl-tests prints them (same columns and units, so the table
// can be pasted where nccl-tests output goes), the average bus bandwidth lines, and the pairwise
// matrix; rendered from the report's JSON alone, so `trainproof report FILE` reprints it.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tp {

// The table's header for an operation over `ranks` ranks of `group`.
std::string sweep_table_header(const std::string& op, const std::string& group, int ranks);
// One size: the out-of-place row and the in-place row of sweep.results[] (an in-place row that
// did not run prints N/A).
std::string sweep_table_line(const nlohmann::json& out_of_place, const nlohmann::json& in_place);
// nccl-tests' closing lines after one operation's table, from its rows (both passes, as
// sweep.results[] holds them): "# Out of bounds values : N OK|FAILED", "# Avg bus bandwidth    :
// X" over the rows that ran (N/A when none did), then trainproof's own average over sizes of
// 1 MiB and more on a line that does not start with the same words, so a script that greps
// "Avg bus bandwidth" finds one figure per operation, as it does in nccl-tests' output.
std::string sweep_op_closing_lines(const std::vector<nlohmann::json>& rows);

// The whole summary of a sweep report; `with_tables` false leaves out the tables a run already
// printed as it went.
std::string render_sweep_summary(const nlohmann::json& report, bool with_tables);

}  // namespace tp
