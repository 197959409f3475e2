#include "app/accept/accept_report.h"

#include <algorithm>

#include "app/judge/baseline.h"
#include "app/report/gate.h"

namespace tp {
namespace {

using nlohmann::json;

json tagged(json check, const std::string& stage) {
  check["stage"] = stage;
  return check;
}

json attempt_json(const StageAttempt& a) {
  json checks = a.checks;
  for (const json& c : a.threshold_checks) checks.push_back(c);
  return {{"stage", a.stage},
          {"attempt", a.attempt},
          {"stopped", a.stopped},
          {"verdict", verdict_of_checks(checks)},
          {"checks", checks}};
}

void warn_on_other_work(const AcceptConfig& config, json& context) {
  const std::string hash = context.value("scenario_hash", "");
  if (config.expected_hash.empty() || hash == config.expected_hash) return;
  context["warnings"].push_back("the gate's thresholds were measured with scenario " +
                                config.expected_hash + " (gate.scenario_hash), and this run is " +
                                hash + ": AU, step CV and goodput thresholds may not apply");
}

// One entry per host, with every stage's reasons (add_sections).
void add_nodes(json& report, const json& nodes) {
  json& all = report["nodes"];
  if (!all.is_array()) all = json::array();
  for (const json& node : nodes) {
    const auto same = std::find_if(all.begin(), all.end(), [&node](const json& n) {
      return n.is_object() && node.is_object() && n.value("host", "") == node.value("host", "");
    });
    if (same == all.end()) {
      all.push_back(node);
      continue;
    }
    // Every stage's findings stay, in the order the stages ran; a later stage's other fields
    // (scores, ranks) fill in what the earlier lacked.
    json& kept = *same;
    kept["flagged"] = kept.value("flagged", false) || node.value("flagged", false);
    json& reasons = kept["reasons"];
    if (!reasons.is_array()) reasons = json::array();
    for (const json& why : node.value("reasons", json::array()))
      if (std::find(reasons.begin(), reasons.end(), why) == reasons.end()) reasons.push_back(why);
    if (node.contains("findings") && node["findings"].is_array()) {
      json& findings = kept["findings"];
      if (!findings.is_array()) findings = json::array();
      for (const json& found : node["findings"])
        if (std::find(findings.begin(), findings.end(), found) == findings.end())
          findings.push_back(found);
    }
    for (const auto& [field, value] : node.items())
      if (!kept.contains(field)) kept[field] = value;
  }
}

}  // namespace

void add_sections(json& report, const json& sections) {
  for (const auto& [key, section] : sections.items()) {
    if (key == "sweep" && report.contains("sweep") && report["sweep"].is_object()) {
      for (const auto& [part, value] : section.items()) report["sweep"][part] = value;
      continue;
    }
    if (key == "nodes" && section.is_array()) {
      add_nodes(report, section);
      continue;
    }
    report[key] = section;
  }
}

json accept_report(const AcceptConfig& config, const std::vector<StageAttempt>& attempts,
                   const json& job_sections, json context, const json& golden,
                   const std::string& incomplete) {
  json report = {{"schema", kReportSchema}};
  StageAttempts ran;
  json history = json::array();
  for (const StageAttempt& a : attempts) {
    ran[a.stage] = a.attempt;
    history.push_back(attempt_json(a));
  }
  json checks = json::array();
  for (const std::string& stage : kAcceptStages) {
    const StageAttempt* last = nullptr;
    for (const StageAttempt& a : attempts)
      if (a.stage == stage) last = &a;
    if (!last) {
      checks.push_back(tagged(gate_check("stage_" + stage, nullptr, nullptr, "n/a",
                                         config.runs(stage) ? "not run: an earlier stage stopped"
                                                            : "skipped (accept.stages)"),
                              stage));
      continue;
    }
    add_sections(report, last->sections);
    for (const json& c : last->checks) checks.push_back(tagged(c, stage));
  }
  add_sections(report, job_sections);
  for (const json& c : judge_thresholds(config, report, ran)) checks.push_back(c);
  if (!incomplete.empty())
    checks.push_back(gate_check("run_complete", nullptr, nullptr, "incomplete", incomplete));
  if (!golden.is_null())
    for (const json& c : baseline_checks(golden, report, config.tolerance, config.baseline))
      checks.push_back(c);
  if (!context.contains("warnings")) context["warnings"] = json::array();
  warn_on_other_work(config, context);
  report["context"] = std::move(context);
  report["accept"] = {
      {"stages", config.stages},
      {"retries", config.retries},
      {"attempts", history},
      {"incomplete", incomplete.empty() ? json(nullptr) : json(incomplete)},
      {"baseline", config.baseline.empty() ? json(nullptr) : json(config.baseline)}};
  report["gate"] = {{"checks", checks},
                    {"thresholds", thresholds_json(config)},
                    {"warn_margin", config.warn_margin}};
  report["verdict"] = verdict_of_checks(checks);
  return report;
}

}  // namespace tp
