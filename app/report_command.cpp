// `trainproof report FILE`: reprints a report's summary; the exit code follows its verdict.
// `trainproof report compare GOLDEN NEW`: each metric of NEW against GOLDEN
// (app/judge/report_compare.h). `trainproof report merge A B ... --report OUT`: one acceptance's
// stage reports joined, with its verdict recomputed (app/judge/report_merge.h). The file is input
// like any other: checked before it is opened, read, and shown inert.
#include "app/report_command.h"

#include <filesystem>
#include <fstream>
#include <iostream>

#include "app/cli/option_values.h"
#include "app/judge/report_compare.h"
#include "app/judge/report_merge.h"
#include "app/report/report.h"
#include "app/report/report_reader.h"
#include "app/report/report_text.h"
#include "app/report/summary.h"
#include "app/report/summary_parts.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/number_text.h"

namespace tp {
namespace {

// A report named on the command line, refused with a clear error when it is not one.
nlohmann::json load_report(const std::string& path) {
  return read_report_file(path, "report");
}

int run_compare(const Invocation& inv) {
  if (inv.positional.size() != 3)
    throw UsageError("report compare needs GOLDEN and NEW report files, got " +
                     std::to_string(inv.positional.size() - 1));
  const double tolerance = inv.options["tolerance"].as<double>();
  if (!(tolerance > 0 && tolerance <= 1))
    throw UsageError("--tolerance must be in (0, 1], got " + exact_number(tolerance));
  const nlohmann::json comparison = compare_reports(
      visible(load_report(inv.positional[1])), visible(load_report(inv.positional[2])), tolerance);
  std::cout << render_comparison(comparison);
  return exit_code_for(comparison["verdict"]);
}

// With --run_id, every report joined must name that run: a report left in the folder by an
// earlier acceptance is never merged into this one.
void check_run_ids(const std::vector<StageReport>& inputs, const std::string& run_id) {
  if (run_id.empty()) return;
  for (const StageReport& input : inputs) {
    const nlohmann::json::json_pointer where("/context/run_id");
    const nlohmann::json id = input.report.contains(where) ? input.report.at(where) : nullptr;
    if (id != run_id)
      throw UsageError("report merge: '" + input.file + "' is not from run " + run_id +
                       " (its context.run_id is " + (id.is_null() ? "absent" : id.dump()) + ")");
  }
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
  check_run_ids(inputs, run_id_option(inv.options));
  nlohmann::json merged;
  try {
    merged = merge_reports(inputs);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError("report merge: " + json_error_text(e));
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
  return exit_code_for(report["verdict"].get<std::string>());
}

}  // namespace tp
