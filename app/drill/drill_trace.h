#pragma once
// The drill's events with their times, for the drill's trace (docs/report.md, "The trace"): the
// supervisor writes it alone, as it runs outside MPI.
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "app/drill/drill_records.h"

namespace tp {

struct DrillEvent {
  double time_unix = 0;
  std::string event;  // launch, fault, detected, exit, first_step
  int launch = -1;    // index into the result's runs
  int failure = -1;   // index into the result's failures, or -1
  std::string detail;
};

// Pure: every event of the drill, in time order (ties keep the order they happened in).
std::vector<DrillEvent> drill_events(const DrillResult& result);

// Writes the drill's trace where --trace says (by default beside the report) and records its path
// in report["context"]["trace"]; a trace that cannot be written is a warning in the report.
void write_drill_trace(const boost::program_options::variables_map& options,
                       const std::string& report_path, const DrillResult& result,
                       nlohmann::json& report);

}  // namespace tp
