// `trainproof report FILE`: reprints a report's summary; the exit code follows its verdict.
// `trainproof report compare GOLDEN NEW`: each metric of NEW against GOLDEN
// (app/judge/report_compare.h). `trainproof report merge A B ... --report OUT`: one acceptance's
// stage reports joined, with its verdict recomputed (app/judge/report_merge.h). The file is input
// like any other: checked before it is opened, read, and shown inert.
#include "app/report_command.h"

#include <filesystem>
#include <fstream>
#include <iostream>

#include "app/judge/report_compare.h"
#include "app/judge/report_merge.h"
#include "app/report/report.h"
#include "app/report/report_text.h"
#include "app/report/summary.h"
#include "app/report/summary_parts.h"
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

int run_merge(const Invocation& inv) {
  if (inv.positional.size() < 3)
    throw UsageError("report merge needs the accept report and one or more others, got " +
                     std::to_string(inv.positional.size() - 1) + " file(s)");
  // Merging into the default name in the current folder could replace the accept report itself.
  if (inv.options["report"].defaulted())
    throw UsageError("report merge needs --report OUT, the file to write the merged report to");
  const std::string out = inv.options["report"].as<std::string>();
  std::vector<StageReport> inputs;
  for (size_t i = 1; i < inv.positional.size(); ++i) {
    const std::string& file = inv.positional[i];
    std::error_code ec;
    if (std::filesystem::equivalent(out, file, ec))
      throw UsageError("report merge: --report '" + out + "' is the input '" + file +
                       "'; write the merged report to a file of its own");
    inputs.push_back({file, load_report(file)});
  }
  check_output_file("--report", out);
  nlohmann::json merged;
  try {
    merged = merge_reports(inputs);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(std::string("report merge: ") + e.what());
  }
  make_report_text_valid(merged);  // file names come from the command line, in any bytes
  write_file_atomically(out, merged.dump(2) + "\n");
  std::cout << render_summary(merged) << "report: " << std::filesystem::absolute(out).string()
            << '\n';
  return exit_code_for(merged["verdict"]);
}

}  // namespace

int run_report(const Invocation& inv) {
  if (!inv.positional.empty() && inv.positional.front() == "compare") return run_compare(inv);
  if (!inv.positional.empty() && inv.positional.front() == "merge") return run_merge(inv);
  if (inv.positional.size() != 1)
    throw UsageError("report needs exactly one FILE operand, got " +
                     std::to_string(inv.positional.size()));
  const nlohmann::json report = load_report(inv.positional.front());
  std::cout << render_summary(report);
  return exit_code_for(verdict_of(report, inv.positional.front()));
}

}  // namespace tp
