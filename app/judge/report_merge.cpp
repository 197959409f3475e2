#include "app/judge/report_merge.h"

#include <algorithm>
#include <optional>

#include "app/job/cost.h"
#include "app/job/job_report.h"
#include "app/judge/thresholds.h"
#include "app/report/gate.h"
#include "common/errors.h"

namespace tp {
namespace {

using nlohmann::json;

// Top-level keys the merge handles itself; every other key is a stage's section.
bool is_section(const std::string& key) {
  static const char* const kNotSections[] = {"schema", "verdict", "context",    "gate",
                                             "accept", "drill",   "merged_from"};
  return std::none_of(std::begin(kNotSections), std::end(kNotSections),
                      [&](const char* name) { return key == name; });
}

std::string kind_of(const json& report) {
  if (report.contains("accept")) return "accept";
  if (report.contains("drill")) return "drill";
  if (report.contains("train")) return "train";
  if (report.contains("sweep")) return "sweep";
  return "other";
}

std::string file_list(const std::vector<const StageReport*>& reports) {
  std::string list;
  for (const StageReport* r : reports) list += (list.empty() ? "" : ", ") + r->file;
  return list;
}

struct Inputs {
  const StageReport* accept = nullptr;
  const StageReport* drill = nullptr;
};

Inputs classify(const std::vector<StageReport>& inputs) {
  std::vector<const StageReport*> all, accepts, drills;
  for (const StageReport& input : inputs) {
    all.push_back(&input);
    const std::string kind = kind_of(input.report);
    if (kind == "accept") accepts.push_back(&input);
    if (kind == "drill") drills.push_back(&input);
  }
  if (accepts.empty())
    throw UsageError("report merge: none of " + file_list(all) +
                     " is an accept report (one with an \"accept\" section); give exactly one");
  if (accepts.size() > 1)
    throw UsageError("report merge: " + file_list(accepts) +
                     " are all accept reports; give exactly one");
  if (drills.size() > 1)
    throw UsageError("report merge: " + file_list(drills) +
                     " are all drill reports; give at most one");
  return {accepts.front(), drills.empty() ? nullptr : drills.front()};
}

// What the merge reads from a report, so that a damaged one is refused by name rather than
// failing halfway with a JSON type error.
void check_shape(const StageReport& input) {
  const json& r = input.report;
  const auto refuse = [&](const std::string& what) {
    return UsageError("report '" + input.file + "': " + what);
  };
  if (r.contains("context") && !r["context"].is_object()) throw refuse("context is not an object");
  if (r.contains("drill") && !r["drill"].is_object()) throw refuse("drill is not an object");
  if (!r.contains("gate")) return;
  const json& gate = r["gate"];
  if (!gate.is_object()) throw refuse("gate is not an object");
  if (gate.contains("thresholds") && !gate["thresholds"].is_array())
    throw refuse("gate.thresholds is not an array");
  if (!gate.contains("checks")) return;
  if (!gate["checks"].is_array()) throw refuse("gate.checks is not an array");
  for (const json& c : gate["checks"])
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string() || !c.contains("status") ||
        !c["status"].is_string())
      throw refuse("a gate check has no name or status: " + c.dump());
}

json sections_of(const json& report) {
  json sections = json::array();
  for (auto it = report.begin(); it != report.end(); ++it)
    if (is_section(it.key())) sections.push_back(it.key());
  return sections;
}

// A report that is neither the accept's nor the drill's fills in only what accept did not run.
json take_missing_sections(json& merged, const json& report) {
  json taken = json::array();
  for (auto it = report.begin(); it != report.end(); ++it) {
    if (!is_section(it.key()) || merged.contains(it.key())) continue;
    merged[it.key()] = *it;
    taken.push_back(it.key());
  }
  return taken;
}

const json* member(const json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::optional<double> number_member(const json& object, const char* key) {
  const json* value = member(object, key);
  if (!value || !value->is_number()) return std::nullopt;
  return value->get<double>();
}

void add_warning(json& merged, const std::string& line) {
  json& warnings = merged["context"]["warnings"];
  if (!warnings.is_array()) warnings = json::array();
  warnings.push_back(line);
}

const json* scenario_hash_of(const json& report) {
  const json* context = member(report, "context");
  return context ? member(*context, "scenario_hash") : nullptr;
}

void warn_of_other_work(json& merged, const StageReport& accept, const StageReport& other) {
  const json* ours = scenario_hash_of(accept.report);
  const json* theirs = scenario_hash_of(other.report);
  if (!ours || !theirs || *ours == *theirs) return;
  const auto text = [](const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
  add_warning(merged, "scenario hashes differ: " + accept.file + " has " + text(*ours) + ", " +
                          other.file + " has " + text(*theirs) +
                          "; the merged report joins runs of different work");
}

// A check replaces the one of its name, where it stood, so the table keeps the gate's order.
void put_check(json& checks, const json& check) {
  for (json& c : checks)
    if (c["name"] == check["name"]) {
      c = check;
      return;
    }
  checks.push_back(check);
}

const json* drill_check_of(const json& report) {
  if (!report.contains("gate") || !report["gate"].contains("checks")) return nullptr;
  for (const json& c : report["gate"]["checks"])
    if (c["name"] == "drill") return &c;
  return nullptr;
}

Threshold threshold_of(const json& entry, size_t index, const std::string& file) {
  const std::string direction = entry.is_object() ? entry.value("direction", "") : "";
  if (!entry.is_object() || !entry.contains("check") || !entry["check"].is_string() ||
      !entry.contains("limit") || !entry["limit"].is_number() ||
      (direction != "at_least" && direction != "at_most"))
    throw UsageError("report '" + file + "': gate.thresholds[" + std::to_string(index) +
                     "] needs a check, a direction (at_least or at_most) and a numeric limit");
  const json source = entry.value("source", json(""));
  return {entry["check"].get<std::string>(),
          direction == "at_least" ? Direction::at_least : Direction::at_most,
          entry["limit"].get<double>(), source.is_string() ? source.get<std::string>() : ""};
}

// What the drill measured for one of its thresholds; nothing for a check this merge does not
// know how to measure.
std::optional<Measurement> drill_measurement(const std::string& check, const json& drill,
                                             const json* drill_check) {
  Measurement m;
  m.where = "drill";
  m.skipped_stage = "drill";
  if (check == "max_rto_s") {
    m.value = number_member(drill, "rto_s");
    m.unit = "s";
    m.detail = "worst recovery time, failure to the first step after the relaunch";
    m.why_not = "the drill did not measure drill.rto_s";
    return m;
  }
  if (check == "max_rpo_steps") {
    m.value = number_member(drill, "rpo_steps");
    m.unit = "steps";
    m.detail = "steps lost, worst failure";
    m.why_not = "the drill did not measure drill.rpo_steps";
    return m;
  }
  if (check != "drill") return std::nullopt;
  m.why_not = "the drill's report has neither drill.verdict nor a drill check";
  const json* verdict = member(drill, "verdict");
  const bool has_verdict = verdict && verdict->is_string();
  if (!has_verdict && !drill_check) return m;
  const bool passed =
      (!has_verdict || *verdict == "PASS") && (!drill_check || (*drill_check)["status"] == "pass");
  m.value = passed ? 1 : 0;
  const json reason = drill_check ? drill_check->value("reason", json()) : json();
  if (reason.is_string()) m.detail = reason.get<std::string>();
  if (!reason.is_string() && has_verdict) m.detail = "drill verdict " + verdict->get<std::string>();
  return m;
}

// Judges each of the accept gate's drill thresholds from the drill's report, in place of its
// n/a check. Returns whether the "drill" threshold was among them.
bool judge_drill_thresholds(json& merged, const std::string& accept_file,
                            const json& drill_report) {
  const json& gate = merged["gate"];
  if (!gate.contains("thresholds")) return false;
  const double warn_margin = gate.contains("warn_margin") && gate["warn_margin"].is_number()
                                 ? gate["warn_margin"].get<double>()
                                 : 0.0;
  const json* own_check = drill_check_of(drill_report);
  bool judged_drill = false;
  json checks = gate["checks"];
  for (size_t i = 0; i < gate["thresholds"].size(); ++i) {
    const json& entry = gate["thresholds"][i];
    if (!entry.is_object() || entry.value("stage", json()) != "drill") continue;
    const Threshold t = threshold_of(entry, i, accept_file);
    const auto measured = drill_measurement(t.check, drill_report["drill"], own_check);
    if (!measured) continue;
    // Pass or fail has no WARN band: 1 against a limit of 1 is a clean pass.
    put_check(checks, judge_threshold(t, *measured, t.check == "drill" ? 0.0 : warn_margin));
    judged_drill = judged_drill || t.check == "drill";
  }
  merged["gate"]["checks"] = checks;
  return judged_drill;
}

// The drill ran apart from the accept run, so what its failures cost is shown beside the job's
// goodput rather than folded into it.
void add_job_drill(json& merged, const json& drill) {
  const json* failures = member(drill, "failures");
  if (!merged.contains("job") || !merged["job"].is_object() || !failures || !failures->is_array() ||
      failures->empty())
    return;
  double recovery_s = 0;
  for (const json& failure : *failures)
    if (failure.is_object()) recovery_s += number_member(failure, "rto_s").value_or(0);
  const std::optional<double> redone_s = number_member(drill, "redone_step_seconds");
  merged["job"]["drill"] = {
      {"redone_s", redone_s ? json(*redone_s) : json(nullptr)},
      {"recovery_s", recovery_s},
      {"failures", failures->size()},
      {"note",
       "measured by the drill, a separate run with injected failures: the accept run's goodput "
       "is unchanged"}};
}

// The accept run's prices again, now with the drill's failures, RTO and RPO to price (the cost
// section echoes the rates it was given).
void reprice_with_drill(json& merged) {
  const json* cost = member(merged, "cost");
  if (!cost || !cost->is_object() || !merged.contains("job")) return;
  const json rates = cost->value("inputs", json::object()).value("rates", json::object());
  CostRates r;
  r.node_hour = rates.value("node_hour", 0.0);
  r.gpu_hour = rates.value("gpu_hour", 0.0);
  r.storage_gb_month = rates.value("storage_gb_month", 0.0);
  r.data_gb = rates.value("data_gb", 0.0);
  r.overhead_fraction = rates.value("overhead_fraction", 0.0);
  r.failures_per_node_day = rates.value("failures_per_node_day", 0.0);
  r.currency = cost->value("currency", std::string("USD"));
  merged["cost"] = cost_json(r, cost_inputs_from(merged));
}

// The drill's section, context and check; its final run's sections and checks stay out, as that
// run trained with injected faults.
json take_drill(json& merged, const std::string& accept_file, const StageReport& drill) {
  merged["drill"] = drill.report["drill"];
  if (drill.report.contains("context") && drill.report["context"].contains("drill"))
    merged["context"]["drill"] = drill.report["context"]["drill"];
  const json* own_check = drill_check_of(drill.report);
  if (!judge_drill_thresholds(merged, accept_file, drill.report) && own_check) {
    json check = *own_check;
    check["stage"] = "drill";  // as the accept report tags each stage's own checks
    put_check(merged["gate"]["checks"], check);
  }
  add_job_drill(merged, drill.report["drill"]);
  reprice_with_drill(merged);
  return json::array({"drill"});
}

}  // namespace

json merge_reports(const std::vector<StageReport>& inputs) {
  const Inputs in = classify(inputs);
  for (const StageReport& input : inputs) check_shape(input);
  json merged = in.accept->report;
  if (!merged.contains("gate")) merged["gate"] = json::object();
  if (!merged["gate"].contains("checks")) merged["gate"]["checks"] = json::array();
  json merged_from = json::array();
  for (const StageReport& input : inputs) {
    json taken;
    if (&input == in.accept) {
      taken = sections_of(input.report);
    } else {
      taken = &input == in.drill ? take_drill(merged, in.accept->file, input)
                                 : take_missing_sections(merged, input.report);
      warn_of_other_work(merged, *in.accept, input);
    }
    merged_from.push_back(
        {{"file", input.file}, {"kind", kind_of(input.report)}, {"sections", taken}});
  }
  merged["merged_from"] = merged_from;
  merged["verdict"] = verdict_of_checks(merged["gate"]["checks"]);
  return merged;
}

}  // namespace tp
