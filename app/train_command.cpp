// `trainproof train`: the training stage alone, priced, judged against a baseline when one is
// given, and published (docs/architecture.md, "How a step flows").
#include "app/train_command.h"

#include "app/cli/mpi_command.h"
#include "app/job/cost.h"
#include "app/job/job_timeline.h"
#include "app/judge/baseline.h"
#include "app/judge/gate_judge.h"
#include "app/stages/train_stage.h"

namespace tp {

int run_train(const Invocation& inv) {
  const TrainConfig cfg = train_config_from(inv.options);  // usage errors before MPI starts
  const CostRates rates = cost_rates_from(inv.options);
  const Baseline baseline = baseline_from(inv.options);
  const GateConfig gate =
      gate_config_from(inv.options, inv.option_source, cfg, {"train"}, "trainproof train");
  return run_mpi_command(training_command("train", inv, cfg), [&](World& world) {
    JobClock job = JobClock::since_process_start();
    job.mark(kLaunch);
    agree_outputs_writable(inv.options, world);
    TrainStage stage = train_stage(inv, cfg, world, job);
    add_job_and_cost(stage.report, world, job, stage.sums, rates);
    if (world.rank == 0) {
      add_threshold_checks(stage.report, gate, "train");
      judge_against_baseline(stage.report, baseline);
    }
    write_run_trace(inv, cfg, world, stage.report, stage.trace, "train");
    return publish_report(inv, stage.report, world, stage.preempted);
  });
}

}  // namespace tp
