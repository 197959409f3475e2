// The training stage: one rank of a data-parallel run, as a sequence of named steps
// (docs/architecture.md, "How a step flows").
#include "app/stages/train_stage.h"

#include <mpi.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "app/cli/mpi_command.h"
#include "app/cli/option_values.h"
#include "app/job/job_report.h"
#include "app/report/context.h"
#include "app/report/drain_lines.h"
#include "app/report/outputs.h"
#include "app/report/report.h"
#include "app/report/report_text.h"
#include "app/report/summary.h"
#include "app/stages/backend_selection.h"
#include "app/stages/run_facts.h"
#include "app/stages/topology_facts.h"
#include "app/stages/train_setup.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/log.h"
#include "common/sysinfo.h"
#include "mpi/check.h"
#include "mpi/clock_sync.h"
#include "mpi/collective_check.h"
#include "train/checkpoint_driver.h"
#include "train/preemption.h"
#include "train/run_progress.h"
#include "train/step_loop.h"
#include "train/watchdog.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// What the run's stages produce for its report.
struct RunOutcome {
  std::string start_time;
  std::optional<DatasetSpec> dataset;
  CollectiveCheck collective;
  TrainResult result;
  double first_step_end_unix = 0;
  std::optional<CheckpointRestore> restored;
  const CheckpointDriver* checkpoints = nullptr;
  TopologyPreflight topology;
  std::vector<std::string> heartbeat_warnings;  // rank 0
  int stopped_by = 0;  // without checkpoints: the agreed stop (train/preemption.h), or 0
};

// NCCL opens connections lazily, for each algorithm and protocol it first picks, and its choice
// follows the size: one reduction of every bucket size during set-up, under the set-up
// allowance, keeps that from eating a training step's deadline. The gradients it leaves are
// overwritten by step 1's backward.
void warm_up_bucket_sizes(const TrainConfig& cfg, Backends& backends) {
  if (backends.comm->name() != "nccl") return;
  std::vector<size_t> done;
  for (const Bucket& b :
       plan_buckets(cfg.model.layers, size_t(cfg.model.hidden) * cfg.model.hidden, cfg.bucket_mb)) {
    if (std::find(done.begin(), done.end(), b.count) != done.end()) continue;
    done.push_back(b.count);
    backends.comm->allreduce_sum(backends.compute->gradients() + b.offset, b.count);
  }
  backends.comm->take_comm_timing();
}

// The self-check reduces through the step's own collective, in the gradient buffer (the memory
// the step reduces), before step 1 overwrites it.
CollectiveCheck check_collective(const TrainConfig& cfg, const World& world, Backends& backends) {
  ComputeBackend& compute = *backends.compute;
  const size_t floats = std::min({size_t(cfg.bucket_mb * 262144.0) + 1024, size_t(1) << 20,
                                  size_t(cfg.model.layers) * cfg.model.hidden * cfg.model.hidden});
  const ReductionBuffer buffer{
      compute.gradients(), floats,
      [&](const std::vector<float>& v) { compute.write_gradients(v.data(), v.size()); },
      [&](std::vector<float>& v) { compute.read_gradients(v.data(), v.size()); }};
  const CollectiveCheck check =
      check_allreduce(*backends.comm, world, buffer, cfg.test.corrupt_collective_rank);
  if (check.wrong_elements > 0)
    spdlog::error("collective self-check: {} wrong elements, first on rank {}",
                  check.wrong_elements, check.first_wrong_rank);
  if (cfg.test.mpi_error_rank == world.rank)
    mpiCheck(MPI_Bcast(nullptr, -1, MPI_INT, 0, world.comm));  // count -1: MPI_ERR_COUNT
  warm_up_bucket_sizes(cfg, backends);
  return check;
}

// Set-up's parts that grow with the job, each marked in the timeline by its name.
Backends start_backends(const TrainConfig& cfg, const World& world, Heartbeat& heartbeat,
                        Watchdog& watchdog, RunOutcome& run, JobClock& job) {
  Backends backends = select_backends(cfg, world, &heartbeat, watchdog.comm_deadline());
  job.mark(kSetupBackends);
  run.heartbeat_warnings = check_heartbeats_visible(world, heartbeat);
  job.mark(kSetupHeartbeatCheck);
  run.topology = run_topology_preflight(cfg, world, backends);
  job.mark(kSetupTopology);
  return backends;
}

// The collective self-check, then the GEMM rate alone; returns the rate.
double check_before_steps(const TrainConfig& cfg, const World& world, Backends& backends,
                          RunOutcome& run, JobClock& job) {
  run.collective = check_collective(cfg, world, backends);
  job.mark(kSetupCollectiveCheck);
  const double gemm_rate = backends.compute->measure_gemm_rate(0.2);
  job.mark(kSetupGemmRate);
  return gemm_rate;
}

void announce(const TrainConfig& cfg, const World& world, const Backends& backends,
              int64_t first_step) {
  // A requeued job that finds its work done says so and ends with verdict NONE (docs/report.md).
  if (world.rank == 0 && first_step > cfg.steps)
    spdlog::warn("training already complete at step {} (train.steps={}): no step to run",
                 first_step - 1, cfg.steps);
  if (world.rank == 0)
    spdlog::info(
        "{} ranks on {} hosts; model {} layers x {} hidden, seq {}, global batch {}; "
        "compute {}, comm {} ({})",
        world.size, world.hosts.size(), cfg.model.layers, cfg.model.hidden, cfg.model.seq,
        cfg.model.global_batch, backends.compute->name(), backends.comm->name(),
        cfg.overlap ? "overlapped" : "blocking");
  mpiCheck(MPI_Barrier(world.comm));
}

// The loader's position after a step is a function of the step; each manifest records it.
std::function<json(int64_t)> loader_position(const TrainConfig& cfg,
                                             const std::optional<DatasetSpec>& dataset) {
  if (!dataset) return [](int64_t) { return json::object(); };
  return [samples = dataset->samples, batch = cfg.model.global_batch](int64_t step) {
    const int64_t consumed = step * batch;
    return json{{"data_loader", {{"epoch", consumed / samples}, {"cursor", consumed % samples}}}};
  };
}

RunRecord record_of(const TrainConfig& cfg, const RunOutcome& run, RunFacts&& facts,
                    const std::string& comm_timing_method) {
  RunRecord record;
  record.config = cfg;
  record.steps_run = run.result.steps_run;
  record.first_step_end_unix = run.first_step_end_unix;
  record.restored = run.restored;
  if (run.stopped_by != 0) record.preempted = {signal_name(run.stopped_by), run.result.last_step};
  if (run.checkpoints) {
    if (const auto& p = run.checkpoints->preempted())
      record.preempted = {signal_name(p->signal), p->step};
    record.saves = run.checkpoints->saves();
    record.checkpoint_final_wait_s = run.checkpoints->final_wait_s();
  }
  record.collective = run.collective;
  record.comm_timing_method = comm_timing_method;
  for (RankFacts& rank : facts.ranks) {
    record.ranks.push_back(rank.info);
    record.digests.push_back(rank.digest);
  }
  record.timings = std::move(facts.timings);
  record.bucket_seconds = std::move(facts.bucket_seconds);
  std::vector<std::string> affinities, hosts;
  for (const RankFacts& rank : facts.ranks) {
    affinities.push_back(rank.info.cpu_affinity);
    hosts.push_back(rank.info.host);
  }
  record.cpu_share = cpu_shares(affinities, hosts);
  if (run.dataset) {
    DataRecord data{*run.dataset, {}, record.cpu_share};
    for (const RankFacts& rank : facts.ranks) data.ranks.push_back(rank.load);
    record.data = std::move(data);
  }
  return record;
}

void write_report(const std::string& path, const json& report) {
  try {
    write_file_atomically(path, report.dump(2) + "\n");
  } catch (const RuntimeError& e) {
    throw RuntimeError(std::string("cannot write the report on ") + identity() + ": " + e.what());
  }
}

// Rank 0 builds the report from the figures every rank gathered.
json build_run_report(const Invocation& inv, const TrainConfig& cfg, const World& world,
                      const Backends& backends, const RunOutcome& run, RunFacts facts) {
  ContextInputs context{inv,
                        cfg,
                        world,
                        run.start_time,
                        {backends.compute->name(), backends.comm->name(), backends.notes,
                         backends.gpu, backends.gpu_sharers},
                        facts.gpus.gpus,
                        facts.gpus.warnings,
                        int64_t(run.result.measured.size()),
                        run.checkpoints ? std::optional(run.checkpoints->folder()) : std::nullopt,
                        run.topology.nodes,
                        run.heartbeat_warnings};
  json communicators = std::move(facts.communicators);
  RunRecord record =
      record_of(cfg, run, std::move(facts), backends.comm->timing_method(cfg.overlap));
  record.topology_reasons = run.topology.judgement.reasons;
  record.topology_measured = run.topology.measured;
  record.context = build_context(context);
  record.context["communicators"] = std::move(communicators);
  return build_report(record);
}

// What the stage hands on, but the report: this rank's figures and samples.
TrainStage stage_of(const RunOutcome& run, const CheckpointDriver* checkpoints) {
  TrainStage stage;
  stage.sums = phase_sums(run.result.measured);
  stage.digest = run.result.digest;
  stage.last_step = run.result.last_step;
  stage.preempted = run.stopped_by != 0 || (checkpoints && checkpoints->preempted().has_value());
  add_train_trace(stage.trace, run.result);
  if (checkpoints) {
    stage.trace.has_checkpoints = true;
    stage.trace.saves = checkpoints->saves();
    stage.trace.stalls = checkpoints->stalls();
  }
  return stage;
}

}  // namespace

TrainStage train_stage(const Invocation& inv, TrainConfig cfg, const World& world, JobClock& job) {
  RunOutcome run;
  run.start_time = utc_timestamp();
  resolve_global_batch(cfg, world.size);
  keep_checkpoint_batch(cfg, world);
  const auto heartbeat = prepare_outputs(cfg, inv.options["report"].as<std::string>(), world);
  HeartbeatCleanup cleanup(*heartbeat, world, cfg.watchdog_dir.empty());
  job.mark(kSetup);
  run.dataset = reconcile_dataset(cfg, world);
  job.mark(kDatasetOpen);
  resolve_faults(cfg, world);
  // Every backend is watched: a rank that stops moving is named from the heartbeats.
  Watchdog watchdog(*heartbeat, world.size, cfg.watchdog_timeout_s, cfg.warmup_steps,
                    cfg.watchdog_publish_s);
  watchdog.set_abort_grace(cfg.watchdog_abort_grace_s);
  check_batch_covers_world(cfg, world);
  // Each long set-up step starts the watchdog's count, and the collective's, afresh.
  heartbeat->beat(0, "start");
  job.mark(kSetup);
  Backends backends = start_backends(cfg, world, *heartbeat, watchdog, run, job);
  const BatchShare share = batch_share(cfg.model.global_batch, world.size, world.rank);
  initialize_model(cfg, world, backends, share);
  job.mark(kSetupModel);
  AlignedClock clock(cfg.test.clock_offset_rank == world.rank ? cfg.test.clock_offset_s : 0.0);
  if (!cfg.test.skip_clock_alignment) clock.align(world.comm);
  job.mark(kSetupClockAlignment);
  FaultInjector faults(cfg.faults, world.rank, world.host, heartbeat->dir());
  faults.set_node_processes([&heartbeat] { return heartbeat->node_processes(); });
  std::unique_ptr<CheckpointDriver> checkpoints;
  if (!cfg.checkpoint_dir.empty()) {
    checkpoints = std::make_unique<CheckpointDriver>(cfg, world, clock, faults,
                                                     loader_position(cfg, run.dataset));
    job.mark(kSetupCheckpointFolder);
    run.restored = checkpoints->restore(*backends.compute);
    run.checkpoints = checkpoints.get();
    job.mark(kRestore);
  }
  heartbeat->beat(0, "start");
  const double gemm_rate = check_before_steps(cfg, world, backends, run, job);
  announce(cfg, world, backends, checkpoints ? checkpoints->first_step() : 1);

  job.mark(kSetup);
  BatchSetup batches = make_batch_source(cfg, run.dataset, share, world);
  job.mark(kDatasetOpen);
  StepLoop loop(cfg, world.rank, *backends.compute, *backends.comm, *batches.source, faults,
                *heartbeat, clock);
  RunProgress progress(heartbeat->dir(), world.rank, world.size, run.restored);
  watchdog.end_set_up();
  const int64_t first_step = checkpoints ? checkpoints->first_step() : 1;
  const int64_t last_warmup_step = first_step + cfg.warmup_steps - 1;
  const StopHook stop = [&](int64_t step) {
    progress.step_ended();
    if (step == last_warmup_step) job.mark(kWarmupSteps);
    if (step >= cfg.steps) return false;  // training is complete: nothing is left to stop
    if (checkpoints) return checkpoints->stop_requested(step, *backends.compute);
    // Without checkpoints only accept arms a stop (its signals and time budget): a plain train
    // run spends no collective on it.
    if (stop_points_armed()) run.stopped_by = agreed_stop(world.comm);
    return run.stopped_by != 0;
  };
  // The hook allocates the checkpoint's host copy: set-up, before the first step's clock starts.
  const CheckpointHook hook =
      checkpoints ? checkpoints->checkpoint_hook(*backends.compute) : nullptr;
  job.mark(kSetup);
  run.result = loop.run(first_step, hook, stop);
  // A run that ended within its warm-up measured no steady step.
  job.mark(run.result.measured.empty() ? kWarmupSteps : kSteadySteps);
  if (checkpoints) checkpoints->finish();
  job.mark(kFinalCheckpointWait);
  run.first_step_end_unix = progress.first_step_end_unix();

  RunFacts facts = gather_run_facts(world, backends, run.result, gemm_rate, batches.loader);
  TrainStage stage = stage_of(run, checkpoints.get());
  if (world.rank == 0)
    stage.report = build_run_report(inv, cfg, world, backends, run, std::move(facts));
  cleanup.at_end();
  job.mark(kTeardown);
  return stage;
}

void add_job_and_cost(json& report, const World& world, JobClock& job, const StepPhaseSums& sums,
                      const CostRates& rates) {
  json section = gather_job_section(world, job, sums);
  if (world.rank != 0) return;
  report["job"] = std::move(section);
  report["cost"] = cost_json(rates, cost_inputs_from(report));
}

int publish_report(const Invocation& inv, json& report, const World& world, bool preempted) {
  int exit_code = kExitPass;
  if (world.rank == 0) {
    const SideOutputs outputs = side_outputs_from(inv.options, false);
    record_strict(report, outputs);
    make_report_text_valid(report);
    const std::string path = inv.options["report"].as<std::string>();
    write_report(path, report);
    write_side_outputs(report, outputs);
    std::cout << '\n'
              << render_summary(report) << "report: " << fs::absolute(path).string() << '\n'
              << trace_line(report) << node_action_lines(report, path) << std::flush;
    exit_code = preempted ? kExitPreempted : exit_code_under(report["verdict"], outputs);
  }
  mpiCheck(MPI_Bcast(&exit_code, 1, MPI_INT, 0, world.comm));
  return exit_code;
}

MpiCommand training_command(const std::string& name, const Invocation& inv,
                            const TrainConfig& cfg) {
  MpiCommand command;
  command.name = name;
  // The async checkpoint writer calls MPI from its own thread.
  command.thread_level = cfg.checkpoint_async ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED;
  command.thread_level_reason =
      "checkpoint.async=true needs MPI_THREAD_MULTIPLE (use checkpoint.async=false)";
  command.log_level = inv.options["log.level"].as<std::string>();
  command.host_for_rank = [split = cfg.test.split_hosts](const std::string& host, int rank,
                                                         int size) {
    return pretend_host(split, host, rank, size);
  };
  set_test_linger(command, inv.options);
  return command;
}

}  // namespace tp
