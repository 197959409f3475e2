// `trainproof report FILE`: reprints a report's summary; the exit code follows its verdict.
// The file is input like any other: checked before it is opened, read, and shown inert.
#include <fstream>
#include <iostream>

#include "app/report.h"
#include "app/summary.h"
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

}  // namespace

int run_report(const Invocation& inv) {
  if (inv.positional.size() != 1)
    throw UsageError("report needs exactly one FILE operand, got " +
                     std::to_string(inv.positional.size()));
  const std::string path = inv.positional.front();
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
    const std::string verdict = verdict_of(report, path);
    std::cout << render_summary(report);
    return exit_code_for(verdict);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError("report '" + path + "': " + e.what());
  }
}

}  // namespace tp
