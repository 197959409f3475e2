// `trainproof report FILE`: reprints a report's summary; the exit code follows its verdict.
#include <fstream>
#include <iostream>

#include "app/report.h"
#include "app/summary.h"
#include "app/train_command.h"
#include "common/errors.h"

namespace tp {

int run_report(const Invocation& inv) {
  if (inv.positional.size() != 1)
    throw UsageError("report needs exactly one FILE operand, got " +
                     std::to_string(inv.positional.size()));
  const std::string path = inv.positional.front();
  std::ifstream in(path);
  if (!in) throw UsageError("report: cannot open '" + path + "'");
  nlohmann::json report;
  try {
    report = nlohmann::json::parse(in);
    if (report.value("schema", "") != kReportSchema)
      throw UsageError("report '" + path + "': schema is not " + std::string(kReportSchema));
    std::cout << render_summary(report);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError("report '" + path + "': " + e.what());
  }
  return exit_code_for(report["verdict"]);
}

}  // namespace tp
