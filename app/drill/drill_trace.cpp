#include "app/drill/drill_trace.h"

#include <algorithm>
#include <exception>

#include "trace/trace_file.h"

namespace tp {
namespace {

int launch_index(const DrillResult& result, const std::string& dir) {
  for (size_t i = 0; i < result.runs.size(); ++i)
    if (result.runs[i].dir == dir || result.runs[i].name == dir) return int(i);
  return -1;
}

void add_failure_events(const DrillResult& result, std::vector<DrillEvent>& events) {
  for (size_t f = 0; f < result.failures.size(); ++f) {
    const DrillFailure& failure = result.failures[f];
    const int launch = launch_index(result, failure.run);
    events.push_back({failure.fault_unix, "fault", launch, int(f), failure.fault});
    if (failure.detected)
      events.push_back({failure.fault_unix + failure.detected_after_s, "detected", launch, int(f),
                        failure.kind});
    if (failure.recovery && failure.recovery->rto_s) {
      const auto& restored = failure.recovery->restored_step;
      events.push_back(
          {failure.fault_unix + *failure.recovery->rto_s, "first_step",
           launch < 0 ? -1 : launch + 1, int(f),
           restored ? "restored step " + std::to_string(*restored) : std::string("started over")});
    }
  }
}

}  // namespace

std::vector<DrillEvent> drill_events(const DrillResult& result) {
  std::vector<DrillEvent> events;
  for (size_t i = 0; i < result.runs.size(); ++i) {
    const DrillRunEntry& run = result.runs[i];
    if (run.start_unix <= 0) continue;
    events.push_back({run.start_unix, "launch", int(i), -1, run.name});
    events.push_back(
        {run.end_unix, "exit", int(i), -1, run.name + " exit " + std::to_string(run.exit_code)});
  }
  add_failure_events(result, events);
  std::stable_sort(events.begin(), events.end(), [](const DrillEvent& a, const DrillEvent& b) {
    return a.time_unix < b.time_unix;
  });
  return events;
}

void write_drill_trace(const boost::program_options::variables_map& options,
                       const std::string& report_path, const DrillResult& result,
                       nlohmann::json& report) {
  const std::string option = options.count("trace") ? options["trace"].as<std::string>() : "";
  const std::string path = trace_path_for(option, report_path);
  report["context"]["trace"] = nullptr;
  if (path.empty()) return;
  const std::vector<DrillEvent> events = drill_events(result);
  std::vector<double> times;
  std::vector<int64_t> launches, failures;
  std::vector<std::string> names, details;
  for (const DrillEvent& e : events) {
    times.push_back(e.time_unix);
    names.push_back(e.event);
    launches.push_back(e.launch);
    failures.push_back(e.failure);
    details.push_back(e.detail);
  }
  try {
    TraceFile file(path, MPI_COMM_NULL);
    const nlohmann::json& context = report["context"];
    file.attribute("schema", "trainproof.trace/1");
    file.attribute("report", report_path);
    file.attribute("run_id", context.value("run_id", ""));
    file.attribute("scenario_hash", context.value("scenario_hash", ""));
    file.attribute("start_time", context.value("start_time", ""));
    file.attribute("subcommand", "drill");
    file.attribute("world_size", int64_t(context.value("world_size", 0)));
    file.root_values("drill/time_unix", {times.size()}, times);
    file.root_strings("drill/event", 16, names);
    file.root_values("drill/launch", {launches.size()}, launches);
    file.root_values("drill/failure", {failures.size()}, failures);
    file.root_strings("drill/detail", 128, details);
    file.close();
    report["context"]["trace"] = path;
  } catch (const std::exception& e) {
    report["context"]["warnings"].push_back(std::string("the trace was not written (--trace): ") +
                                            e.what());
  }
}

}  // namespace tp
