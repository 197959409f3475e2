#include "app/report/outputs.h"

#include <filesystem>

#include "app/report/gate.h"
#include "app/report/junit.h"
#include "app/report/prometheus.h"
#include "common/errors.h"
#include "common/files.h"

namespace tp {

void record_strict(nlohmann::json& report, const SideOutputs& outputs) {
  report["context"]["strict"] = outputs.strict;
}

void write_side_outputs(const nlohmann::json& report, const SideOutputs& outputs) {
  if (!outputs.junit.empty()) write_file_atomically(outputs.junit, render_junit(report));
  if (!outputs.metrics.empty()) write_file_atomically(outputs.metrics, render_prometheus(report));
}

std::string trace_line(const nlohmann::json& report) {
  const nlohmann::json* trace = nullptr;
  if (report.contains("context") && report["context"].contains("trace"))
    trace = &report["context"]["trace"];
  if (trace == nullptr || !trace->is_string()) return "";
  return "trace: " + std::filesystem::absolute(trace->get<std::string>()).string() + "\n";
}

int exit_code_under(const std::string& verdict, const SideOutputs& outputs) {
  if (outputs.strict && verdict == "WARN") return kExitFail;
  return exit_code_for(verdict);
}

}  // namespace tp
