#pragma once
// What every report kind shares: its schema, gate.checks[] and the verdict they give
// (docs/report.md, "Schema" and "Verdict").
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tp {

inline constexpr const char* kReportSchema = "trainproof.report/3";
// Reports `trainproof report` still reads (docs/report.md, "Schema"): /2 had
// checkpoint.stall_fraction where /3 has checkpoint.overhead, and 0 where a sweep average measured
// nothing; /1 had no context.nodes, and nvidia_smi_topo (rank 0's alone) in the context itself.
inline constexpr const char* kOlderReportSchemas[] = {"trainproof.report/2", "trainproof.report/1"};

// One entry of gate.checks[]: status is pass, warn, fail, none, n/a (a skipped stage's check,
// app/judge/thresholds.h), or incomplete (a run or stage cut short: app/accept/accept_progress.h).
nlohmann::json gate_check(const std::string& name, nlohmann::json value, nlohmann::json threshold,
                          const std::string& status, const std::string& reason);
// The topology preflight's check (docs/report.md, "Checks"): WARN naming every host that differs
// from the majority or has a degraded link; n/a when preflight.topology=false read nothing.
nlohmann::json topology_check(const std::map<std::string, std::vector<std::string>>& reasons,
                              bool measured);

// One entry of nodes[].findings[] (docs/report.md, "Node actions"): the check that flagged the
// node and the reason; `status` ("fail" or "warn") where the finding has a verdict of its own
// (a pairwise flag), else "" and the node takes its check's status; `summary` a short form of the
// reason (the figures an operator reads first), else "".
nlohmann::json node_finding(const std::string& check, const std::string& reason,
                            const std::string& status = "", const std::string& summary = "");

// What a report is: "accept", "drill", "train", "node-check", "sweep", or "report" for one that
// says none of them.
std::string report_kind(const nlohmann::json& report);

// The stage a check belongs to: its own `stage`, else the stage that measures its threshold
// (gate.thresholds[]), else what the report is ("train", "sweep", "drill"; "gate" for an
// acceptance run's threshold that names no stage).
std::string stage_of_check(const nlohmann::json& check, const nlohmann::json& report);

// FAIL when any check fails, else INCOMPLETE when any is incomplete, else NONE when nothing ran
// (or every check is n/a), else WARN when any warns, else PASS.
std::string verdict_of_checks(const nlohmann::json& checks);

// Exit code for a verdict string: PASS, WARN and NONE (nothing ran) are 0, FAIL and INCOMPLETE 1
// (a run a signal stopped ends 4 instead: the caller knows it was preempted).
int exit_code_for(const std::string& verdict);

}  // namespace tp
