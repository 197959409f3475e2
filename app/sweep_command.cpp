// `trainproof sweep`: the sweep stage alone, judged against a baseline when one is given, and
// published with its own summary (docs/sweep.md).
#include "app/sweep_command.h"

#include <mpi.h>

#include <filesystem>
#include <iostream>

#include "app/cli/mpi_command.h"
#include "app/cli/option_values.h"
#include "app/judge/baseline.h"
#include "app/judge/gate_judge.h"
#include "app/report/drain_lines.h"
#include "app/report/gate.h"
#include "app/report/outputs.h"
#include "app/report/report_text.h"
#include "app/report/sweep_summary.h"
#include "app/stages/sweep_config.h"
#include "app/stages/sweep_stage.h"
#include "common/errors.h"
#include "common/files.h"
#include "mpi/check.h"

namespace tp {
namespace {

using nlohmann::json;

int report_sweep(const Invocation& inv, const SweepConfig& cfg, json report, const World& world) {
  int exit_code = kExitPass;
  if (world.rank == 0) {
    const SideOutputs outputs = side_outputs_from(inv.options, false);
    record_strict(report, outputs);
    make_report_text_valid(report);
    const std::string path = inv.options["report"].as<std::string>();
    write_file_atomically(path, report.dump(2) + "\n");
    write_side_outputs(report, outputs);
    std::cout << render_sweep_summary(report, cfg.split != "none")
              << "report: " << std::filesystem::absolute(path).string() << '\n'
              << trace_line(report) << node_action_lines(report, path) << std::flush;
    exit_code = exit_code_under(report["verdict"], outputs);
  }
  mpiCheck(MPI_Bcast(&exit_code, 1, MPI_INT, 0, world.comm));
  return exit_code;
}

}  // namespace

int run_sweep_command(const Invocation& inv) {
  const SweepConfig cfg = sweep_config_from(inv.options);  // usage errors before MPI starts
  // The sweep trains nothing: of the training settings it reads the backends, the watchdog and
  // the preflight's (sweep --help lists those alone; app/cli/option_groups.cpp).
  const TrainConfig train = stage_config_from(inv.options);
  const Baseline baseline = baseline_from(inv.options);
  const std::string stage = cfg.mode == "pairwise" ? "pairwise" : "sweep";
  const GateConfig gate =
      gate_config_from(inv.options, inv.option_source, train, {stage}, "trainproof sweep");
  MpiCommand command;
  command.name = "sweep";
  command.log_level = inv.options["log.level"].as<std::string>();
  command.host_for_rank = [split = train.test.split_hosts](const std::string& host, int rank,
                                                           int size) {
    return pretend_host(split, host, rank, size);
  };
  set_test_linger(command, inv.options);
  return run_mpi_command(command, [&](World& world) {
    agree_outputs_writable(inv.options, world);
    RunTrace trace;
    json report = sweep_stage(inv, cfg, train, world, trace);
    if (world.rank == 0) {
      add_threshold_checks(report, gate, stage);
      judge_against_baseline(report, baseline);
    }
    write_run_trace(inv, train, world, report, trace, "sweep");
    return report_sweep(inv, cfg, std::move(report), world);
  });
}

}  // namespace tp
