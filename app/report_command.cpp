// `trainproof report FILE`: reprints a report's summary; the exit code follows its verdict.
// `trainproof report compare GOLDEN NEW`: each metric of NEW against GOLDEN (app/report_compare.h).
// The file is input like any other: checked before it is opened, read, and shown inert.
#include <fstream>
#include <iostream>

#include "app/report.h"
#include "app/report_compare.h"
#include "app/summary.h"
#include "app/summary_parts.h"
#include "app/train_command.h"
#include "common/errors.h"
#include "common/files.h"

namespace tp {
namespace {

std::string verdict_of(const nlohmann::json& report, const std::string& path) {
  const auto verdict = report.find("verdict");
  if (verdict == report.end() || !verdict->is_string() ||
      (*verdict != "PASS" && *verdict != "WARN" && *verdict != "FAIL" && *verdict != "NONE"))
    throw UsageError("report '" + path + "': verdict is not one of PASS, WARN, FAIL, NONE");
  return verdict->get<std::string>();
}

// Reads a report named on the command line, refusing what is not one with a clear error.
nlohmann::json load_report(const std::string& path) {
  // A FIFO would block the open and a folder would read as an empty report.
  if (const std::string what = not_a_regular_file(path); !what.empty())
    throw UsageError("report: '" + path + "' " + what);
  std::ifstream in(path);
  if (!in) throw UsageError("report: cannot open '" + path + "'");
  try {
    const nlohmann::json report = nlohmann::json::parse(in);
    const std::string schema = report.is_object() ? report.value("schema", "") : "";
    if (schema != kReportSchema && schema != kOlderReportSchema)
      throw UsageError("report '" + path + "': schema is not " + std::string(kReportSchema) +
                       " or " + kOlderReportSchema);
    verdict_of(report, path);
    return report;
  } catch (const nlohmann::json::exception& e) {
    throw UsageError("report '" + path + "': " + e.what());
  }
}

int run_compare(const Invocation& inv) {
  if (inv.positional.size() != 3)
    throw UsageError("report compare needs GOLDEN and NEW report files, got " +
                     std::to_string(inv.positional.size() - 1));
  const double tolerance = inv.options["tolerance"].as<double>();
  if (!(tolerance > 0 && tolerance <= 1))
    throw UsageError("--tolerance must be in (0, 1], got " + std::to_string(tolerance));
  const nlohmann::json comparison = compare_reports(
      visible(load_report(inv.positional[1])), visible(load_report(inv.positional[2])), tolerance);
  std::cout << render_comparison(comparison);
  return exit_code_for(comparison["verdict"]);
}

}  // namespace

int run_report(const Invocation& inv) {
  if (!inv.positional.empty() && inv.positional.front() == "compare") return run_compare(inv);
  if (inv.positional.size() != 1)
    throw UsageError("report needs exactly one FILE operand, got " +
                     std::to_string(inv.positional.size()));
  const nlohmann::json report = load_report(inv.positional.front());
  std::cout << render_summary(report);
  return exit_code_for(verdict_of(report, inv.positional.front()));
}

}  // namespace tp
