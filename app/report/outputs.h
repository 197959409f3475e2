#pragma once
// Writes what a subcommand that judges asked for beside its report (app/cli/output_options.h):
// --junit (app/report/junit.h), --metrics (app/report/prometheus.h); and its exit code, a WARN
// exiting 1 under --strict while the verdict stays WARN (docs/report.md, "Outputs for CI and
// monitoring").
#include <nlohmann/json.hpp>
#include <string>

#include "app/cli/output_options.h"

namespace tp {

// The report records whether strict mode was on (context.strict).
void record_strict(nlohmann::json& report, const SideOutputs& outputs);

// Writes --junit and --metrics from the finished report, each atomically.
void write_side_outputs(const nlohmann::json& report, const SideOutputs& outputs);

// "trace: PATH\n" when the run wrote its trace (context.trace), else "".
std::string trace_line(const nlohmann::json& report);

// exit_code_for, with a WARN exiting 1 under --strict.
int exit_code_under(const std::string& verdict, const SideOutputs& outputs);

}  // namespace tp
