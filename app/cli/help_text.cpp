// `trainproof --help` and `trainproof SUBCOMMAND --help`: what each subcommand does, how it is
// launched, every option with its default, and the fault grammar.
#include <algorithm>
#include <cstdlib>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "app/cli/cli.h"
#include "app/cli/cli_options.h"
#include "common/number_text.h"

namespace tp {
namespace {

// The overview of every subcommand and the exit codes: `trainproof --help`.
std::string general_usage() {
  std::ostringstream out;
  out << "trainproof: prove that a cluster can train.\n\n"
         "usage: trainproof SUBCOMMAND [options]\n"
         "  accept   the acceptance run: preflight, collective sweep, pairwise matrix,\n"
         "           training with checkpoints and a cold restore in one job, held against\n"
         "           the [gate] thresholds (a host file: --gate.file), with the job's\n"
         "           timeline, goodput and cost; one report, one verdict\n"
         "  train    run synthetic data-parallel training steps with real collectives, time\n"
         "           data, compute and communication on every rank, and write a JSON report\n"
         "  sweep    time every collective at every size on the fabric (nccl-tests' bus\n"
         "           bandwidth, every element checked), or every pair of nodes\n"
         "           (sweep.mode=pairwise) to name a slow node or link\n"
         "  drill    recovery drill: launch train with faults, relaunch with --resume auto "
         "after\n"
         "           each failure, and prove the final state bit-identical to a reference run\n"
         "  prepare-data  write a synthetic dataset to data.dir (MPI: every rank writes its\n"
         "           share of the shards), for train to read with data.dir\n"
         "  node-check  check this one machine against its host type's [inventory] (GPUs,\n"
         "           NICs and their ports, driver versions, memory, CPUs, mounts) without MPI,\n"
         "           in seconds; ends 'HOST | Healthy' or 'HOST | ERROR: ...' as NHC does\n"
         "  report   print the summary of an existing JSON report: trainproof report FILE;\n"
         "           compare two: trainproof report compare GOLDEN NEW [--tolerance 0.9];\n"
         "           join stage reports: trainproof report merge A B [C...] --report OUT;\n"
         "           or list the nodes to act on: trainproof report nodes FILE [--format F]\n\n"
         "Launch accept, train, sweep and prepare-data with mpirun or srun, one rank per\n"
         "device or core set. Every option can also be set in a scenario file: [train]\n"
         "steps = 100 is --train.steps=100. Byte counts (every *_bytes option) take binary\n"
         "suffixes: 64M is 67108864, 1K (or 1KiB) is 1024.\n"
         "Exit codes: 0 PASS, WARN or NONE (nothing ran: training was already complete),\n"
         "1 FAIL (correctness or performance), 2 bad usage or input (nothing ran),\n"
         "3 the run could not complete, 4 preempted (checkpoint committed; --resume auto).\n";
  return out.str();
}

std::string report_usage() {
  return "usage: trainproof report FILE\n"
         "       trainproof report compare GOLDEN NEW [--tolerance 0.9]\n"
         "       trainproof report merge ACCEPT DRILL [MORE...] --report OUT\n"
         "       trainproof report nodes FILE [--format FORMAT] [--min-status fail|warn]\n"
         "       trainproof report hostfile GOLDEN [MORE...] [--share 0.8] > HOST.ini\n"
         "       trainproof report junit FILE OUT | trainproof report metrics FILE OUT\n"
         "       trainproof report plot FILE [--trace TRACE] [--baseline GOLDEN]\n"
         "       trainproof report html FILE [--html OUT] [--trace TRACE] [--baseline GOLDEN]\n"
         "Prints the summary of a report and exits with its verdict's code (0 PASS/WARN, 1 "
         "FAIL).\n"
         "compare prints each metric of NEW against GOLDEN (golden, new, ratio, which way is\n"
         "better, status); a metric that keeps less than --tolerance of its golden value in\n"
         "its better direction fails, and so does the comparison (exit 1). It also says where\n"
         "the two runs differ in what they ran (scenario hash, world size, steps, backends,\n"
         "sweep sizes). See docs/acceptance.md.\n"
         "merge writes to OUT the accept report joined with the drill's section and checks\n"
         "(gate.drill, gate.max_rto_s, gate.max_rpo_steps judged), and exits with the verdict\n"
         "recomputed from them.\n"
         "nodes prints every node a check flagged, with its reasons (list), as Slurm's\n"
         "compressed host list for --exclude (hostlist), as scontrol update ... State=DRAIN\n"
         "lines for the FAIL nodes (--min-status warn: the WARN ones too), their reasons\n"
         "'trainproof: CHECK STATUS: ...' of at most 128 characters with the run id (drain;\n"
         "printed, never run), as State=RESUME lines for the nodes the report passed that act\n"
         "only on a node trainproof drained (resume), or as JSON; exit 0 (see docs/report.md,\n"
         "\"Node actions\").\n"
         "hostfile prints a host file written from golden runs of one host type: [reference]\n"
         "the worst figure of the runs, each [gate] threshold --share of it, [inventory] what\n"
         "their node-check reports found; every line with its source (docs/acceptance.md).\n"
         "junit and metrics write OUT as --junit and --metrics would have (JUnit XML; the\n"
         "Prometheus text format for node_exporter's textfile collector).\n"
         "plot writes PNGs beside FILE (FILE's name with .phases.png, .busbw.png, ...), each "
         "for\n"
         "a stage that ran, from the report and its trace (FILE with .trace.h5 for .json); it\n"
         "needs python3-matplotlib and python3-h5py (exit 2 naming them when missing). html\n"
         "writes one self-contained page (verdict and checks, timeline, summary, plots,\n"
         "context, scenario) to FILE with .html for .json; compare --html OUT writes two\n"
         "reports side by side. See docs/report.md, \"Pictures\".\n"
         "All options are accepted, so a whole scenario file can be passed.\n";
}

std::string node_check_usage() {
  return "usage: trainproof node-check [--gate.file scenarios/hosts/HOST.ini] [--level "
         "quick|full]\n"
         "           [--report FILE] [--junit FILE] [--metrics FILE]\n"
         "Not an MPI rank: checks the machine it runs on against the host file's [inventory]\n"
         "(a key not given is not judged; [gate] thresholds are ignored), reads its RDMA\n"
         "ports' states and error counters, and prints one line per finding, then\n"
         "'HOST | Healthy' or 'HOST | ERROR: trainproof: CHECK: REASON' (NHC's form, for\n"
         "Slurm's HealthCheckProgram, a prolog or an epilog). Exit 0 healthy (or WARN\n"
         "findings only), 1 a FAIL finding, 2 bad usage, 3 the machine could not be read.\n"
         "Its report works with report nodes --format=drain like any other. See\n"
         "docs/node-check.md.\n";
}

// The first lines of --help: what the subcommand does and how it is launched.
std::string usage_of(const std::string& subcommand) {
  std::ostringstream out;
  if (subcommand.empty()) {
    out << general_usage();
  } else if (subcommand == "accept") {
    out << "usage: mpirun -np N trainproof accept --scenario scenarios/accept.ini\n"
           "           --checkpoint.dir=DIR [--gate.file scenarios/hosts/HOST.ini] [options]\n"
           "Runs accept.stages in order (preflight, sweep, pairwise, train, restore), each again\n"
           "up to gate.retries times while it fails, and judges every gate.* threshold that is\n"
           "not 0 (PASS; WARN within gate.warn_margin of it or only on a retry; FAIL). Each\n"
           "check names its threshold's source. A threshold given on the command line that no\n"
           "selected stage measures is exit 2 before anything runs; a skipped stage's checks\n"
           "are n/a. --baseline GOLDEN adds report compare's metrics as checks. The drill's\n"
           "checks (gate.drill, gate.max_rto_s, gate.max_rpo_steps) are judged by report merge\n"
           "(scripts/acceptance.sh runs accept, the drill and the merge). See "
           "docs/acceptance.md.\n";
  } else if (subcommand == "train") {
    out << "usage: mpirun -np N trainproof train [--scenario FILE] [options]\n"
           "Runs train.steps steps; ranks share model.batch. Writes --report on rank 0.\n";
  } else if (subcommand == "sweep") {
    out << "usage: mpirun -np N trainproof sweep [--scenario FILE] [options]\n"
           "Times sweep.ops from sweep.min_bytes to sweep.max_bytes, out of place and in place,\n"
           "over comm.backend, and checks every element of every row (a wrong one is FAIL).\n"
           "Prints a table in nccl-tests' columns and units and writes --report on rank 0.\n"
           "sweep.split=node|rail sweeps each node's or each rail's ranks at once;\n"
           "sweep.mode=pairwise measures every pair of nodes and flags a slow node or link.\n"
           "See docs/sweep.md.\n";
  } else if (subcommand == "prepare-data") {
    out << "usage: mpirun -np N trainproof prepare-data --data.dir=DIR [--scenario FILE] "
           "[options]\n"
           "Writes data.samples samples (content from train.seed) in data.files shards of\n"
           "data.format, with a checksum per sample and data.dir/index.json. Running it again\n"
           "with the same parameters does nothing; with others it is an error unless --force.\n"
           "Before writing anything it checks that data.dir's filesystem has room for the\n"
           "whole dataset (exit 2 naming the bytes needed and free otherwise).\n";
  } else if (subcommand == "node-check") {
    out << node_check_usage();
  } else if (subcommand == "drill") {
    out << "usage: trainproof drill --launcher \"mpirun -np N\" [--scenario FILE] [options]\n"
           "Not an MPI rank: runs the launcher itself. A reference run, then the run with the\n"
           "--fault specs, relaunched with --resume auto after each failure (each fault fires\n"
           "once), then the final digest compared with the reference. Every training option is\n"
           "forwarded to each run. Needs checkpoint.dir and checkpoint.every; the runs use\n"
           "checkpoint.dir/drill-<time>-<pid>/. Writes --report (the final run's report with a\n"
           "drill section) and prints a drill summary. See docs/drills.md.\n";
  } else {
    out << report_usage();
  }
  return out.str();
}

// Boost prints a default as its type streams it: 0.9 as 0.90000000000000002, a bool as 0 or 1.
// Each number in "(=...)" is printed as the shortest text that reads back to it, and each bool
// option's default as true or false.
std::string readable_defaults(const std::string& help) {
  std::set<std::string> bools;
  const po::options_description registry = option_registry();  // options() refers into it
  for (const auto& option : registry.options())
    if (dynamic_cast<const po::typed_value<bool>*>(option->semantic().get()))
      bools.insert("--" + option->long_name());
  static const std::regex number(R"(\(=(-?[0-9][0-9.eE+-]*)\))");
  std::istringstream lines(help);
  std::string out, line, option;
  while (std::getline(lines, line)) {
    // A line that names an option starts "  --NAME"; its description may run on below it.
    if (line.rfind("  --", 0) == 0) option = line.substr(2, line.find_first_of(" [", 2) - 2);
    std::string fixed;
    auto at = line.cbegin();
    for (std::sregex_iterator m(line.begin(), line.end(), number), end; m != end; ++m) {
      fixed.append(at, (*m)[0].first);
      const std::string text = (*m)[1].str();
      std::string shown = exact_number(std::strtod(text.c_str(), nullptr));
      if (bools.count(option) && (text == "0" || text == "1"))
        shown = text == "1" ? "true" : "false";
      fixed += "(=" + shown + ")";
      at = (*m)[0].second;
    }
    fixed.append(at, line.cend());
    // "true" is longer than "1", "0.9" shorter than Boost's 17 digits: the padding before the
    // description takes up the difference, so the columns and the width stay as Boost laid
    // them out.
    const size_t gap = fixed.find("  ", 2);
    if (gap != std::string::npos && fixed.size() > line.size()) {
      const size_t run = fixed.find_first_not_of(' ', gap) - gap;
      fixed.erase(gap, std::min(fixed.size() - line.size(), run - 1));
    } else if (gap != std::string::npos && fixed.size() < line.size()) {
      fixed.insert(gap, line.size() - fixed.size(), ' ');
    }
    out += fixed + "\n";
  }
  return out;
}

}  // namespace

std::string help_text(const std::string& subcommand, bool with_test_hooks) {
  // --help: the subcommand's own groups and the common ones; --help-all: every option.
  const std::vector<std::string>& groups = option_groups_of(subcommand);
  std::ostringstream options;
  if (with_test_hooks)
    options << option_registry(true);
  else
    options << option_registry_of(groups, false);
  std::ostringstream out;
  out << usage_of(subcommand) << '\n' << readable_defaults(options.str());
  if (!with_test_hooks)
    out << "\n"
        << (subcommand.empty()
                ? "trainproof SUBCOMMAND --help lists a subcommand's own options.\n"
                : "Only the options this subcommand reads are listed; the others are accepted\n"
                  "too, so a whole scenario file can be passed.\n")
        << "trainproof --help-all lists every option, the test suite's hooks (test.*)\n"
           "included.\n";
  if (with_test_hooks || std::count(groups.begin(), groups.end(), "faults"))
    out << '\n' << fault_grammar();
  return out.str();
}

}  // namespace tp
