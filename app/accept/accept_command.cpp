// `trainproof accept`: the acceptance run as a sequence of named stages, each run again on a
// failure up to gate.retries times, gathered into one report with one verdict
// (docs/acceptance.md).
#include "app/accept/accept_command.h"

#include <mpi.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>

#include "app/accept/accept_burn.h"
#include "app/accept/accept_config.h"
#include "app/accept/accept_inputs.h"
#include "app/accept/accept_preflight.h"
#include "app/accept/accept_progress.h"
#include "app/accept/accept_report.h"
#include "app/accept/accept_restore.h"
#include "app/cli/mpi_command.h"
#include "app/cli/option_values.h"
#include "app/job/job_report.h"
#include "app/judge/baseline.h"
#include "app/report/gate.h"
#include "app/report/report_text.h"
#include "app/report/summary.h"
#include "app/stages/stage_watch.h"
#include "app/stages/sweep_stage.h"
#include "app/stages/train_stage.h"
#include "common/errors.h"
#include "common/files.h"
#include "gpu/gpu_loader.h"
#include "mpi/check.h"
#include "train/preemption.h"

namespace tp {
namespace {

using nlohmann::json;

struct AcceptInputs {
  const Invocation& inv;
  AcceptConfig accept;
  TrainConfig train;
  SweepConfig sweep;
  CostRates rates;
  Baseline baseline;
};

// What the stages leave for the report, on rank 0; digest and step on every rank.
struct AcceptRun {
  std::vector<StageAttempt> attempts;
  json partial = json::object();  // every section so far, for judging a stage's thresholds
  json context, preflight_nodes;
  std::optional<TrainStage> trained;
  AcceptStop stop;  // a signal or the time budget (app/accept/accept_progress.h)
  JobClock job = JobClock::since_process_start();
  std::optional<std::chrono::steady_clock::time_point> budget_end;  // accept.time_budget_s
  std::string deadline_of;  // the stage whose own deadline is the one armed now, or ""
  RunTrace trace;           // this rank's samples of every stage (docs/report.md, "The trace")
  std::optional<NodeRead> node_before;  // the preflight's read of this rank's node
  NodeChanges node_changes;             // what rose on it, stage by stage, from that read on
  std::optional<std::vector<std::string>> rail_nics;  // its ranks' NICs, at its first rank
  std::string last_stage;                             // the stage that started last
  NodeWatch node_watch;                               // its GPUs, watched from then on
};

// A stop as the report records it: a budget stop names the stage deadline that was armed.
AcceptStop stop_of(int stop, const std::string& stage, bool in_stage, const AcceptRun& run) {
  AcceptStop s{stop, stage, in_stage, ""};
  if (stop == kStopBudget) s.deadline_of = run.deadline_of;
  return s;
}

// The report sections a train or sweep report contributes (its context, verdict and checks are
// the accept report's own).
json sections_of(const json& report, std::initializer_list<const char*> keys) {
  json sections = json::object();
  for (const char* key : keys)
    if (report.contains(key)) sections[key] = report[key];
  return sections;
}

// The stage's own checks, less those another stage or a threshold judges in an accept run.
json own_checks(const json& report, const AcceptInputs& in) {
  json checks = json::array();
  for (const json& c : report["gate"]["checks"]) {
    const std::string name = c.value("name", "");
    if (name == "topology" && in.accept.runs("preflight")) continue;
    // The gate's min_straggler_score judges it, with its source: train's own check of that name
    // (the default, advice) would be a second one.
    if (name == "min_straggler_score") continue;
    checks.push_back(c);
  }
  return checks;
}

const std::string& report_file(const AcceptInputs& in) {
  return in.inv.options["report"].as<std::string>();
}

// A report's nodes[] by host: adding a finding to a node is a lookup, not a scan of 4,096 nodes.
class NodeList {
 public:
  explicit NodeList(json& nodes) : nodes_(nodes) {
    if (!nodes_.is_array()) nodes_ = json::array();
    for (size_t i = 0; i < nodes_.size(); ++i) index_[nodes_[i].value("host", "")] = i;
  }
  void add(const std::string& host, const json& finding) {
    const auto [at, made] = index_.try_emplace(host, nodes_.size());
    if (made)
      nodes_.push_back({{"host", host},
                        {"flagged", true},
                        {"reasons", json::array()},
                        {"findings", json::array()}});
    json& node = nodes_[at->second];
    node["flagged"] = true;
    node["reasons"].push_back(finding["reason"]);
    node["findings"].push_back(finding);
  }

 private:
  json& nodes_;
  std::map<std::string, size_t> index_;
};

AcceptBurnSettings burn_settings(const AcceptInputs& in, const NodeRead& node) {
  AcceptBurnSettings s;
  s.burn_s = in.accept.burn_s;
  s.rules = &in.inv.inventory;
  s.every_pair_nvlink = node.taken && node.driver.every_pair_nvlink();
  return s;
}

StageAttempt run_preflight(const AcceptInputs& in, const World& world, AcceptRun& run) {
  StageWatch watch(in.train, report_file(in), world, "preflight");
  PreflightStage p =
      preflight_stage(in.train, world, in.inv.inventory, in.inv.inventory_file,
                      open_files_needed(in.accept.stages, in.sweep.plan.ops, world.size));
  watch.end();
  run.preflight_nodes = p.nodes;
  run.node_before = std::move(p.read);
  run.node_changes.last = *run.node_before;
  run.node_watch = start_node_watch(*run.node_before, in.accept.sample_s);
  // The burn runs inside the watch, so load_health and xid cover it (docs/node-check.md).
  BurnStage burn;
  if (in.accept.burn) burn = burn_stage(burn_settings(in, *run.node_before), world);
  run.job.mark("preflight");
  // The preflight's findings are the first of each node's list (app/accept/accept_report.h): a
  // node missing what its host type must have first, then its GPUs' health, then its topology.
  std::map<std::string, std::vector<json>> by_host;  // one pass, hosts in order
  for (const auto& [host, finding] : p.inventory_findings) by_host[host].push_back(finding);
  for (const auto& [host, reasons] : p.section["topology_reasons"].items())
    for (const json& why : reasons)  // "topology: ..." already
      by_host[host].push_back(node_finding("topology", why.get<std::string>()));
  for (const auto& [host, finding] : burn.findings) by_host[host].push_back(finding);
  json nodes = json::array();
  NodeList list(nodes);
  for (const auto& [host, findings] : by_host)
    for (const json& finding : findings) list.add(host, finding);
  if (in.accept.burn && world.rank == 0) {
    p.section["burn"] = burn.section;
    for (const json& check : burn.checks) p.checks.push_back(check);
  }
  return {"preflight", 1, {{"preflight", p.section}, {"nodes", nodes}}, p.checks};
}

// At a stage's end, each node is read again and what rose since the read at the stage's start is
// judged as that stage's (docs/node-check.md, "Change over a load"). Every rank calls it, the
// same on every rank: the preflight read the nodes, or did not. `last`: the read after the last
// stage (test.sysfs_root_after where the test hooks give one).
void judge_stage_change(const AcceptInputs& in, const World& world, AcceptRun& run,
                        const std::string& stage, bool last) {
  if (!run.node_before) return;
  if (!run.rail_nics)  // collective: every rank asks at the same stage
    run.rail_nics =
        rail_nics_on_node(in.train.test, world,
                          in.train.comm_backend == "nccl" ||
                              (in.train.comm_backend == "auto" && missing_gpu_driver().empty()));
  add_stage_change(run.node_changes, read_this_node(in.train.test, world, last), *run.rail_nics,
                   stage);
}

// After the last stage, what rose in each stage, with what the watch saw from the preflight on
// (clock reasons, the PCIe link while busy, XIDs): their checks and findings are the preflight's,
// whose read they start from.
void judge_health_change(const AcceptInputs& in, const World& world, AcceptRun& run) {
  if (!run.node_before) return;  // the same on every rank: the preflight ran, or did not
  judge_stage_change(in, world, run, run.last_stage, true);
  const HealthStage change = health_change_stage(run.node_changes, world);
  const LoadStages load =
      load_health_stages(run.node_watch, run.node_changes.last, in.inv.inventory, world);
  if (world.rank != 0) return;
  for (auto a = run.attempts.rbegin(); a != run.attempts.rend(); ++a) {
    if (a->stage != "preflight") continue;
    NodeList list(a->sections["nodes"]);
    for (const HealthStage* judged : {&change, &load.load_health, &load.xid}) {
      a->checks.push_back(judged->check);
      for (const auto& [host, finding] : judged->findings) list.add(host, finding);
    }
    return;
  }
}

StageAttempt run_sweep(const AcceptInputs& in, const World& world, AcceptRun& run,
                       const std::string& mode) {
  SweepConfig cfg = in.sweep;
  cfg.mode = mode;
  TrainConfig train = in.train;
  train.preflight_topology = train.preflight_topology && !in.accept.runs("preflight");
  if (mode == "pairwise" && world.hosts.size() < 2)
    return {"pairwise", 1, json::object(),
            json::array({gate_check("pairwise", nullptr, nullptr, "n/a",
                                    "the job spans one node: there is no pair of nodes")})};
  RunTrace trace;
  const json report = sweep_stage(in.inv, cfg, train, world, trace);
  take_parts(run.trace, std::move(trace));
  run.job.mark(mode == "pairwise" ? "pairwise" : "sweep");
  if (world.rank != 0) return {mode == "pairwise" ? "pairwise" : "sweep", 1, {}, {}};
  if (run.context.is_null()) run.context = report["context"];
  // Its nodes stand when no training stage gives the richer ones.
  return {mode == "pairwise" ? "pairwise" : "sweep", 1, sections_of(report, {"sweep", "nodes"}),
          own_checks(report, in)};
}

StageAttempt run_train(const AcceptInputs& in, const World& world, AcceptRun& run) {
  TrainConfig cfg = in.train;
  cfg.preflight_topology = cfg.preflight_topology && !in.accept.runs("preflight");
  run.trained = train_stage(in.inv, cfg, world, run.job);
  take_parts(run.trace, std::move(run.trained->trace));
  if (run.trained->preempted) run.stop = stop_of(stop_agreed(), "train", true, run);
  if (world.rank != 0) return {"train", 1, {}, {}};
  const json& report = run.trained->report;
  run.context = report["context"];  // the richest: training's backends, GPUs and warnings
  return {"train", 1, sections_of(report, {"train", "checkpoint", "data", "ranks", "nodes"}),
          own_checks(report, in)};
}

StageAttempt run_restore(const AcceptInputs& in, const World& world, AcceptRun& run) {
  StageWatch watch(in.train, report_file(in), world, "restore");
  RestoreStage r = restore_stage(in.train, world, *run.trained);
  watch.end();
  run.job.mark("cold_restore");
  return {"restore", 1, {{"restore", r.section}}, r.checks};
}

StageAttempt run_once(const std::string& stage, const AcceptInputs& in, const World& world,
                      AcceptRun& run) {
  if (world.rank == 0) spdlog::info("accept: stage {}", stage);
  if (stage == "preflight") return run_preflight(in, world, run);
  if (stage == "sweep") return run_sweep(in, world, run, "collectives");
  if (stage == "pairwise") return run_sweep(in, world, run, "pairwise");
  if (stage == "train") return run_train(in, world, run);
  return run_restore(in, world, run);
}

// A stage's attempt; one that a stop cut short (every rank threw StageStopped at the same stop
// point) is kept as stopped, with nothing measured.
StageAttempt attempt_stage(const std::string& stage, const AcceptInputs& in, const World& world,
                           AcceptRun& run) {
  StageAttempt a;
  try {
    a = run_once(stage, in, world, run);
  } catch (const StageStopped& stopped) {
    run.job.mark(stage);
    a.stage = stage;
    run.stop = stop_of(stopped.stop(), stage, true, run);
  }
  a.stopped = run.stop.in_stage && run.stop.stage == stage;
  if (a.stopped && world.rank == 0) {
    spdlog::warn("accept: stage {} stopped: {}", stage, signal_name(run.stop.stop));
    a.checks.push_back(gate_check(
        "stage_complete", nullptr, nullptr, "incomplete",
        std::string("stopped by ") + signal_name(run.stop.stop) + " before it finished"));
  }
  return a;
}

// Runs a stage, and again while it fails and retries are left; every attempt is kept.
void run_stage(const std::string& stage, const AcceptInputs& in, const World& world,
               AcceptRun& run) {
  for (int attempt = 1;; ++attempt) {
    StageAttempt a = attempt_stage(stage, in, world, run);
    a.attempt = attempt;
    int again = 0;
    if (world.rank == 0) {
      add_sections(run.partial, a.sections);
      a.threshold_checks = stage_threshold_checks(in.accept, stage, run.partial, attempt);
      again = attempt <= in.accept.retries &&
              stage_failed(in.accept, stage, run.partial, a.checks) && run.stop.stop == 0;
      if (again)
        spdlog::warn("accept: stage {} failed on attempt {}; running it again ({} of {} retries)",
                     stage, attempt, attempt, in.accept.retries);
      run.attempts.push_back(std::move(a));
    }
    mpiCheck(MPI_Bcast(&again, 1, MPI_INT, 0, world.comm));
    // A stage without stop points of its own (preflight, restore) is not run again once a signal
    // or the budget asks the run to stop: the next stage's check records the stop.
    if (!again || agreed_stop(world.comm) != 0) return;
  }
}

// The context so far: the richest stage's, with the preflight's nodes, and --run_id even before
// any stage gave a context (a partial report names its run: scripts/acceptance.sh keeps it).
json context_of(const AcceptRun& run, const AcceptInputs& in) {
  json context = run.context.is_null() ? json::object() : run.context;
  if (!run.preflight_nodes.is_null()) context["nodes"] = run.preflight_nodes;
  if (const std::string id = run_id_option(in.inv.options);
      !id.empty() && !context.contains("run_id"))
    context["run_id"] = id;
  return context;
}

std::chrono::steady_clock::time_point seconds_from_now(double seconds) {
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             std::chrono::duration<double>(seconds));
}

// From here on SIGTERM and SIGUSR1 stop the run at its next stop point, and so does the budget.
void arm_stops(const AcceptConfig& accept, AcceptRun& run) {
  install_preemption_handlers();
  if (accept.time_budget_s > 0) {
    run.budget_end = seconds_from_now(accept.time_budget_s);
    set_stop_deadline(*run.budget_end);
  }
}

// As `stage` starts: its own deadline (accept.stage_time_s) when that comes before the budget's
// end, else the budget's. Either stops the stage at its next stop point.
void arm_stage_deadline(const AcceptConfig& accept, const std::string& stage, AcceptRun& run) {
  std::optional<std::chrono::steady_clock::time_point> deadline = run.budget_end;
  run.deadline_of.clear();
  if (const auto own = accept.stage_time_s.find(stage); own != accept.stage_time_s.end()) {
    const auto stage_end = seconds_from_now(own->second);
    if (!deadline || stage_end < *deadline) {
      deadline = stage_end;
      run.deadline_of = stage;
    }
  }
  if (deadline)
    set_stop_deadline(*deadline);
  else
    clear_stop_deadline();
}

// Every selected stage in order, each starting only when no stop was asked for; rank 0 writes the
// report so far as each starts.
void run_stages(const AcceptInputs& in, const std::string& report_path, const World& world,
                AcceptRun& run) {
  for (const std::string& stage : in.accept.stages) {
    if (const int stop = agreed_stop(world.comm); stop != 0) {
      run.stop = stop_of(stop, stage, false, run);
      break;
    }
    arm_stage_deadline(in.accept, stage, run);
    run.last_stage = stage;
    if (world.rank == 0)
      write_partial_report(
          report_path,
          accept_report(
              in.accept, run.attempts, json::object(), context_of(run, in), nullptr,
              "partial report, written as stage " + stage + " started: the run has not finished"),
          stage);
    run_stage(stage, in, world, run);
    if (run.stop.stop != 0) return;
    // The last stage's end is read once all stages are done (judge_health_change).
    if (stage != in.accept.stages.back()) judge_stage_change(in, world, run, stage, false);
  }
  // A signal during the last stage, which finished: the run was still asked to stop.
  if (const int stop = agreed_stop(world.comm);
      run.stop.stop == 0 && stop != 0 && stop != kStopBudget)
    run.stop = stop_of(stop, in.accept.stages.back(), false, run);
}

int accept_on_world(AcceptInputs in, const World& world) {
  resolve_global_batch(in.train, world.size);
  AcceptRun run;
  run.job.mark(kLaunch);
  arm_stops(in.accept, run);
  const std::string report_path = in.inv.options["report"].as<std::string>();
  agree_outputs_writable(in.inv.options, world);
  in.train.checkpoint_lock = check_accept_inputs(in.train, in.sweep, in.accept, report_path, world);
  run.job.mark(kSetup);
  if (world.rank == 0) spdlog::info("accept: every input checked");
  run_stages(in, report_path, world, run);
  judge_health_change(in, world, run);
  json job_sections = {
      {"job",
       gather_job_section(world, run.job, run.trained ? run.trained->sums : StepPhaseSums{})}};
  json report;
  if (world.rank == 0) {
    add_sections(run.partial, job_sections);
    job_sections["cost"] = cost_json(in.rates, cost_inputs_from(run.partial));
    report =
        accept_report(in.accept, run.attempts, job_sections, context_of(run, in),
                      in.baseline.golden, incomplete_reason(in.accept, run.attempts, run.stop));
  }
  write_run_trace(in.inv, in.train, world, report, run.trace, "accept");
  const bool signalled = run.stop.stop != 0 && run.stop.stop != kStopBudget;
  const int code = publish_report(in.inv, report, world, signalled);
  if (world.rank == 0) {
    std::error_code ignored;  // the final report stands for it
    std::filesystem::remove(partial_report_path(report_path), ignored);
  }
  return code;
}

}  // namespace

int run_accept(const Invocation& inv) {
  // Usage errors before MPI starts: a threshold no selected stage measures included.
  const TrainConfig train = train_config_from(inv.options);
  AcceptInputs in{inv,
                  accept_config_from(inv.options, inv.option_source, train),
                  train,
                  sweep_config_from(inv.options),
                  cost_rates_from(inv.options),
                  baseline_from(inv.options)};
  return run_mpi_command(training_command("accept", inv, train),
                         [&](World& world) { return accept_on_world(in, world); });
}

}  // namespace tp
