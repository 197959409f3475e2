#pragma once
// What a sweep prints: its rows as nccl-tests prints them (same columns and units, so the table
// can be pasted where nccl-tests output goes), the average bus bandwidth lines, and the pairwise
// matrix; rendered from the report's JSON alone, so `trainproof report FILE` reprints it.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tp {

// nccl-tests' program for an operation: "all_reduce_perf", "sendrecv_perf", ...
std::string nccl_tests_program(const std::string& op);

// The table's header for an operation over the ranks `world_ranks` of `group` (group `index` in
// sweep.groups[]), as nccl-tests prints it: "# Collective test starting: all_reduce_perf", "# Using
// devices" and one "#  Rank  0 Group  0 Pid 1234 on host device  0 [0000:07:00] NVIDIA H200" line
// per rank from `devices` (sweep.devices[]; at most kDeviceLines of them, then a line saying how
// many more), then the column headings.
inline constexpr size_t kDeviceLines = 64;
std::string sweep_table_header(const std::string& op, const std::string& group,
                               const std::vector<int>& world_ranks, const nlohmann::json& devices,
                               int index);
// One size: the out-of-place row and the in-place row of sweep.results[] (an in-place row that
// did not run prints N/A).
std::string sweep_table_line(const nlohmann::json& out_of_place, const nlohmann::json& in_place);
// nccl-tests' closing lines after one operation's table, from its rows (both passes, as
// sweep.results[] holds them): "# Out of bounds values : N OK|FAILED", "# Avg bus bandwidth    :
// X" over the rows that ran (N/A when none did), then trainproof's own average over sizes of
// 1 MiB and more on a line that does not start with the same words, so a script that greps
// "Avg bus bandwidth" finds one figure per operation, as it does in nccl-tests' output; then
// "#" and "# Collective test concluded: all_reduce_perf".
std::string sweep_op_closing_lines(const std::vector<nlohmann::json>& rows);

// The whole summary of a sweep report; `with_tables` false leaves out the tables a run already
// printed as it went.
std::string render_sweep_summary(const nlohmann::json& report, bool with_tables);

}  // namespace tp
