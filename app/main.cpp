// trainproof: prove that a cluster can train. See README.md and docs/architecture.md.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "app/accept/accept_command.h"
#include "app/cli/build_info.h"
#include "app/cli/cli.h"
#include "app/cli/mpi_command.h"
#include "app/drill/drill_command.h"
#include "app/node_check_command.h"
#include "app/prepare_command.h"
#include "app/report_command.h"
#include "app/sweep_command.h"
#include "app/train_command.h"
#include "common/crash_report.h"
#include "common/errors.h"
#include "common/redact.h"

int main(int argc, char** argv) {
  tp::install_crash_report();
  try {
    const tp::Invocation inv = tp::parse_invocation(argc, argv);
    tp::set_crash_subcommand(inv.subcommand.empty() ? "trainproof" : inv.subcommand);
    tp::set_crash_folder(tp::default_crash_folder(inv.options));
    if (inv.version) {
      std::cout << "trainproof " << tp::build::kVersion << " (" << tp::build::kGitRevision << ")\n";
      return tp::kExitPass;
    }
    if (inv.help) {
      std::cout << tp::help_text(inv.subcommand, inv.help_all);
      return tp::kExitPass;
    }
    if (inv.subcommand == "report") return tp::run_report(inv);
    if (inv.subcommand == "drill") return tp::run_drill(inv);
    if (inv.subcommand == "node-check") return tp::run_node_check(inv);
    if (inv.subcommand == "prepare-data") return tp::run_prepare_data(inv);
    if (inv.subcommand == "sweep") return tp::run_sweep_command(inv);
    if (inv.subcommand == "accept") return tp::run_accept(inv);
    return tp::run_train(inv);
  } catch (const tp::UsageError& e) {
    return tp::exit_with_usage_error(e.what());
  } catch (const std::exception& e) {
    // train handles its own runtime errors (it must abort its peers); this is drill and report.
    std::fprintf(stderr, "trainproof: error: %s\n", tp::message_text(e.what()).c_str());
    return tp::kExitRuntime;
  }
}
