#include "app/cli/general_options.h"

#include <string>

#include "app/cli/cli_options.h"

namespace tp {

namespace po = boost::program_options;

po::options_description general_options() {
  po::options_description group = option_group("General");
  // clang-format off
  group.add_options()
      ("help,h", "show the subcommand's options (its own and these common ones) and exit")
      ("help-all", "show every option of every subcommand, the test suite's hooks (test.*) "
       "included, and exit")
      ("version", "print the version and exit")
      ("scenario", po::value<std::string>()->value_name("FILE"),
       "INI file of options ([section] name = value); the command line wins over it")
      ("report", po::value<std::string>()->default_value("trainproof-report.json")->value_name("FILE"),
       "where rank 0 writes the JSON report")
      ("run_id", po::value<std::string>()->default_value("")->value_name("ID"),
       "names this run in its report (context.run_id): 1 to 64 letters, digits, '.', '_', ':' or "
       "'-'; default: the start time, host and process id. report merge --run_id ID refuses a "
       "report of any other run (scripts/acceptance.sh gives accept and the drill one id)")
      ("junit", po::value<std::string>()->default_value("")->value_name("FILE"),
       "train, sweep, accept, drill, node-check, report merge: also write the checks to FILE as "
       "JUnit XML "
       "(a test suite per stage, a test case per check; FAIL a failure, n/a skipped)")
      ("metrics", po::value<std::string>()->default_value("")->value_name("FILE"),
       "train, sweep, accept, drill, node-check, report merge: also write the verdict, the "
       "checks and the "
       "main figures to FILE in Prometheus' text format, for node_exporter's textfile collector")
      ("trace", po::value<std::string>()->default_value("")->value_name("FILE"),
       "train, sweep, accept, drill: the HDF5 trace of every rank's samples (each step's "
       "phases and buckets, each checkpoint, each sweep iteration, the drill's events; "
       "docs/report.md, \"The trace\"); default: the report's path with .trace.h5 for .json; "
       "none writes no trace")
      ("strict", po::value<bool>()->default_value(false)->implicit_value(true),
       "train, sweep, accept, drill, node-check, report merge: a WARN verdict exits 1 (the "
       "verdict stays "
       "WARN; the report records context.strict)")
      ("log.level", po::value<std::string>()->default_value("info"),
       "trace, debug, info, warn, error, critical or off")
      ("tolerance", po::value<double>()->default_value(0.9),
       "report compare: a metric fails when the new report keeps less than this share of the "
       "golden one, in the metric's better direction; in (0, 1]")
      ("html", po::value<std::string>()->default_value("")->value_name("FILE"),
       "report html: where to write the page (default: the report's path with .html for "
       ".json); report compare: also write both reports side by side as one HTML page to FILE")
      ("baseline", po::value<std::string>()->default_value("")->value_name("FILE"),
       "accept, train, sweep: a golden report of the same work; every metric of report compare "
       "becomes a gate check (baseline_*) that fails below --tolerance of the golden value; "
       "report plot and report html draw its busbw curve beside the run's");
  // clang-format on
  return group;
}

po::options_description report_options() {
  po::options_description group = option_group("Report");
  // clang-format off
  group.add_options()
      ("format", po::value<std::string>()->default_value("list")->value_name("FORMAT"),
       "report nodes: list (each flagged node and its reasons), hostlist (Slurm's compressed "
       "list, for srun --exclude), drain (scontrol update ... State=DRAIN lines, printed, never "
       "run), resume (State=RESUME lines for the nodes the report passed, each acting only when "
       "the node's reason starts with 'trainproof: ') or json")
      ("min-status", po::value<std::string>()->default_value("fail")->value_name("STATUS"),
       "report nodes --format=drain: drain the nodes whose worst finding is FAIL (fail), or WARN "
       "as well (warn)")
      ("share", po::value<double>()->default_value(0.8),
       "report hostfile: each threshold this share of the worst golden figure (an at-most one "
       "that figure over it); in (0.6, 0.95)");
  // clang-format on
  return group;
}

}  // namespace tp
