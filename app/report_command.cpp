// `trainproof report FILE`: reprints a report's summary; the exit code follows its verdict.
// `trainproof report compare GOLDEN NEW`: each metric of NEW against GOLDEN
// (app/judge/report_compare.h). `trainproof report merge A B ... --report OUT`: one acceptance's
// stage reports joined, with its verdict recomputed (app/judge/report_merge.h).
// `trainproof report nodes FILE`: the nodes to act on (app/report/node_actions.h).
// `trainproof report junit|metrics FILE OUT`: its checks as JUnit XML or Prometheus text
// (app/report/junit.h, app/report/prometheus.h). The file is input like any other: checked
// before it is opened, read, and shown inert.
#include "app/report_command.h"

#include <filesystem>
#include <fstream>
#include <iostream>

#include "app/cli/option_values.h"
#include "app/judge/host_file_draft.h"
#include "app/judge/report_compare.h"
#include "app/judge/report_merge.h"
#include "app/report/crash_text.h"
#include "app/report/drain_lines.h"
#include "app/report/gate.h"
#include "app/report/junit.h"
#include "app/report/outputs.h"
#include "app/report/prometheus.h"
#include "app/report/report.h"
#include "app/report/report_reader.h"
#include "app/report/report_text.h"
#include "app/report/summary.h"
#include "app/report/summary_parts.h"
#include "app/report/viz_launcher.h"
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
  const nlohmann::json golden = visible(load_report(inv.positional[1]));
  const nlohmann::json fresh = visible(load_report(inv.positional[2]));
  const nlohmann::json comparison = compare_reports(golden, fresh, tolerance);
  // Two reports with no metric in common (a training report against a sweep's) compare nothing:
  // that is a wrong pair of files, not a verdict.
  if (comparison["verdict"] == "NONE")
    throw UsageError("report compare: nothing to compare: '" + inv.positional[1] + "' is a " +
                     report_kind(golden) + " report and '" + inv.positional[2] + "' a " +
                     report_kind(fresh) + " report, with no metric that both hold");
  std::cout << render_comparison(comparison);
  const std::string html = inv.options["html"].as<std::string>();
  if (!html.empty()) {
    check_output_file("--html", html);
    const int drawn = run_viz_script({"compare-html", inv.positional[1], inv.positional[2], "--out",
                                      html, "--trainproof", executable_path()});
    if (drawn != 0) return drawn;
  }
  return exit_code_for(comparison["verdict"]);
}

// `report plot REPORT` and `report html REPORT`: the report is checked here, the drawing is the
// plot script's (app/report/viz_launcher.h).
int run_pictures(const Invocation& inv) {
  const std::string& what = inv.positional.front();
  if (inv.positional.size() != 2)
    throw UsageError("report " + what + " needs one REPORT file, got " +
                     std::to_string(inv.positional.size() - 1));
  const std::string& file = inv.positional[1];
  load_report(file);
  std::vector<std::string> args{what, file};
  const std::string trace = inv.options["trace"].as<std::string>();
  if (!trace.empty() && trace != "none") args.insert(args.end(), {"--trace", trace});
  // The busbw picture draws a baseline's curve beside the run's.
  if (const std::string baseline = inv.options["baseline"].as<std::string>(); !baseline.empty())
    args.insert(args.end(), {"--baseline", baseline});
  if (what == "html") {
    const std::string html = inv.options["html"].as<std::string>();
    if (!html.empty()) {
      check_output_file("--html", html);
      args.insert(args.end(), {"--out", html});
    }
    args.insert(args.end(), {"--trainproof", executable_path()});
  }
  return run_viz_script(args);
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

int run_nodes(const Invocation& inv) {
  if (inv.positional.size() != 2)
    throw UsageError("report nodes needs one report FILE, got " +
                     std::to_string(inv.positional.size() - 1));
  const std::string format = inv.options["format"].as<std::string>();
  const ReportNodes nodes = report_nodes_of(visible(load_report(inv.positional[1])));
  std::cout << render_nodes(nodes, format, inv.options["min-status"].as<std::string>());
  return kExitPass;
}

// `report hostfile GOLDEN [MORE...]`: a host file from golden runs, on standard output.
int run_hostfile(const Invocation& inv) {
  if (inv.positional.size() < 2)
    throw UsageError(
        "report hostfile needs one or more golden reports (accept, train, sweep, "
        "merged or node-check), got none");
  std::vector<GoldenReport> golden;
  for (size_t i = 1; i < inv.positional.size(); ++i)
    golden.push_back({inv.positional[i], load_report(inv.positional[i])});
  std::cout << draft_host_file(golden, inv.options["share"].as<double>());
  return kExitPass;
}

// `report junit REPORT FILE`, `report metrics REPORT FILE`: an existing report's checks as the
// file --junit or --metrics would have written.
int run_export(const Invocation& inv) {
  const std::string& what = inv.positional.front();
  if (inv.positional.size() != 3)
    throw UsageError("report " + what + " needs a REPORT and the FILE to write, got " +
                     std::to_string(inv.positional.size() - 1) + " operand(s)");
  const std::string& out = inv.positional[2];
  std::error_code ec;
  if (std::filesystem::equivalent(out, inv.positional[1], ec))
    throw UsageError("report " + what + ": '" + out + "' is the report itself");
  check_output_file("report " + what + " FILE", out);
  const nlohmann::json report = visible(load_report(inv.positional[1]));
  write_file_atomically(out, what == "junit" ? render_junit(report) : render_prometheus(report));
  return kExitPass;
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
  const SideOutputs outputs = side_outputs_from(inv.options, true);
  check_run_ids(inputs, run_id_option(inv.options));
  nlohmann::json merged;
  try {
    merged = merge_reports(inputs);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError("report merge: " + json_error_text(e));
  }
  record_strict(merged, outputs);
  make_report_text_valid(merged);  // file names come from the command line, in any bytes
  write_file_atomically(out, merged.dump(2) + "\n");
  write_side_outputs(merged, outputs);
  std::cout << render_summary(merged) << "report: " << std::filesystem::absolute(out).string()
            << '\n'
            << node_action_lines(merged, out);
  return exit_code_under(merged["verdict"], outputs);
}

}  // namespace

int run_report(const Invocation& inv) {
  if (!inv.positional.empty() && inv.positional.front() == "compare") return run_compare(inv);
  if (!inv.positional.empty() && inv.positional.front() == "merge") return run_merge(inv);
  if (!inv.positional.empty() && inv.positional.front() == "nodes") return run_nodes(inv);
  if (!inv.positional.empty() && inv.positional.front() == "hostfile") return run_hostfile(inv);
  if (!inv.positional.empty() &&
      (inv.positional.front() == "plot" || inv.positional.front() == "html"))
    return run_pictures(inv);
  if (!inv.positional.empty() &&
      (inv.positional.front() == "junit" || inv.positional.front() == "metrics"))
    return run_export(inv);
  if (inv.positional.size() != 1)
    throw UsageError("report needs exactly one FILE operand, got " +
                     std::to_string(inv.positional.size()));
  // A crashed run leaves no report, only its ranks' crash records beside the heartbeats.
  if (is_crash_evidence(inv.positional.front())) {
    std::cout << render_crash_records(read_crash_records(inv.positional.front()));
    return kExitRuntime;
  }
  const nlohmann::json report = load_report(inv.positional.front());
  std::cout << render_summary(report) << node_action_lines(visible(report), inv.positional.front());
  return exit_code_for(report["verdict"].get<std::string>());
}

}  // namespace tp
