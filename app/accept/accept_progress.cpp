#include "app/accept/accept_progress.h"

#include <sstream>

#include "common/files.h"
#include "common/sysinfo.h"
#include "train/preemption.h"

namespace tp {
namespace {

using nlohmann::json;

// The selected stages whose last attempt (the one the report judges) did not complete, in order.
std::vector<std::string> stages_not_completed(const AcceptConfig& config,
                                              const std::vector<StageAttempt>& attempts) {
  std::vector<std::string> missing;
  for (const std::string& stage : config.stages) {
    const StageAttempt* last = nullptr;
    for (const StageAttempt& a : attempts)
      if (a.stage == stage) last = &a;
    if (!last || last->stopped) missing.push_back(stage);
  }
  return missing;
}

std::string joined(const std::vector<std::string>& words) {
  std::string text;
  for (const std::string& w : words) text += (text.empty() ? "" : ", ") + w;
  return text;
}

std::string what_stopped(const AcceptStop& stop, const AcceptConfig& config) {
  if (stop.stop != kStopBudget) return std::string(signal_name(stop.stop)) + " received";
  std::ostringstream text;
  if (const auto own = config.stage_time_s.find(stop.deadline_of); own != config.stage_time_s.end())
    text << "stage " << own->first << "'s deadline (accept.stage_time_s " << own->first << "="
         << own->second << ") ran out";
  else
    text << "the time budget (accept.time_budget_s=" << config.time_budget_s << ") ran out";
  return text.str();
}

}  // namespace

std::string partial_report_path(const std::string& report_path) {
  const std::string suffix = ".json";
  if (report_path.size() > suffix.size() &&
      report_path.compare(report_path.size() - suffix.size(), suffix.size(), suffix) == 0)
    return report_path.substr(0, report_path.size() - suffix.size()) + ".partial.json";
  return report_path + ".partial.json";
}

std::string incomplete_reason(const AcceptConfig& config, const std::vector<StageAttempt>& attempts,
                              const AcceptStop& stop) {
  const std::vector<std::string> missing = stages_not_completed(config, attempts);
  // A budget that runs out once every stage is done cut nothing short; a signal asked to stop.
  if (missing.empty() && (stop.stop == 0 || stop.stop == kStopBudget)) return "";
  std::string reason;
  if (stop.stop == 0)
    reason = "the run ended before it completed every selected stage";
  else if (stop.in_stage)
    reason = what_stopped(stop, config) + " during stage " + stop.stage +
             ": every rank stopped at its next stop point";
  else if (missing.empty())
    reason = what_stopped(stop, config) + " during stage " + stop.stage +
             ", which finished: a run asked to stop is not judged as one left alone";
  else
    reason = what_stopped(stop, config) + " before stage " + stop.stage + " started";
  if (!missing.empty()) reason += "; not completed: " + joined(missing);
  return reason;
}

void write_partial_report(const std::string& report_path, json report, const std::string& stage) {
  report["accept"]["partial"] = {{"running", stage}, {"written_at", utc_timestamp()}};
  write_file_atomically(partial_report_path(report_path), report.dump(2) + "\n");
}

}  // namespace tp
