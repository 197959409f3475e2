#include "app/drill/drill_command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <random>

#include "app/cli/option_values.h"
#include "app/cli/output_options.h"
#include "app/drill/drill_classify.h"
#include "app/drill/drill_launcher.h"
#include "app/drill/drill_logic.h"
#include "app/drill/drill_node_loss.h"
#include "app/drill/drill_summary.h"
#include "app/drill/drill_supervisor.h"
#include "app/drill/drill_trace.h"
#include "app/drill/drill_verdict.h"
#include "app/report/outputs.h"
#include "app/report/report.h"
#include "checkpoint/store.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/number_text.h"
#include "common/sysinfo.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct DrillOptions {
  TrainConfig train;
  std::string launcher;
  int max_restarts = 0;
  double run_timeout_s = 0;
  uint64_t seed = 0;
  std::string external_kill;  // empty, "rank" or "node"
  NodeLossAction on_node_loss = NodeLossAction::shrink;
  int first_ranks = 0;           // drill.ranks: {ranks} of the first launch
  std::string reference_digest;  // given: the reference run is skipped
  std::string report_path;
  SideOutputs outputs;                    // --junit, --metrics, --strict: the drill's own
  std::vector<FaultSpec> run_faults;      // fired inside the launches
  std::vector<FaultSpec> corrupt_faults;  // applied by the drill between launches
};

void check_launch_options(const DrillOptions& options) {
  if (options.launcher.empty())
    throw UsageError(
        "drill needs --launcher, the command that starts the ranks, for example "
        "--launcher \"mpirun -np 4\" or, inside an allocation, --launcher \"srun --mpi=pmix\"");
  if (options.train.checkpoint_dir.empty() || options.train.checkpoint_every <= 0)
    throw UsageError("drill needs checkpoint.dir and checkpoint.every > 0: it restores from them");
  if (options.max_restarts < 0)
    throw UsageError("drill.max_restarts must be >= 0, got " +
                     std::to_string(options.max_restarts));
  if (!(options.run_timeout_s > 0))
    throw UsageError("drill.run_timeout_s must be > 0, got " + exact_number(options.run_timeout_s));
}

// A corrupt fault only shows in a relaunch's restore, so something must fail first.
void check_corrupt_has_failure(const DrillOptions& options) {
  const bool will_fail =
      !options.external_kill.empty() ||
      std::any_of(options.run_faults.begin(), options.run_faults.end(),
                  [](const FaultSpec& fault) { return fault.kind != FaultSpec::Kind::slow; });
  if (!options.corrupt_faults.empty() && !will_fail)
    throw UsageError("--fault '" + options.corrupt_faults.front().text +
                     "': corrupt damages the checkpoint a relaunch restores, so the drill needs a "
                     "failure too (a kill, hang or random fault, or drill.external_kill=true)");
}

std::string external_kill_from(const std::string& value) {
  // The words a boolean option took before `node` existed still read as they did.
  if (value == "false" || value == "0" || value == "no" || value == "off") return "";
  if (value == "true" || value == "1" || value == "yes" || value == "on" || value == "rank")
    return "rank";
  if (value == "node") return "node";
  throw UsageError("drill.external_kill='" + value + "' is not one of: false, true, rank, node");
}

// A node fault, a random draw that may be one, or the drill's own node kill.
bool node_loss_possible(const DrillOptions& options) {
  return options.external_kill == "node" ||
         std::any_of(options.run_faults.begin(), options.run_faults.end(), [](const FaultSpec& f) {
           return f.kind == FaultSpec::Kind::node ||
                  (f.kind == FaultSpec::Kind::random && f.may_draw_node);
         });
}

DrillOptions drill_options_from(const po::variables_map& values) {
  DrillOptions options;
  options.train = train_config_from(values);
  options.launcher = values["launcher"].as<std::string>();
  options.max_restarts = values["drill.max_restarts"].as<int>();
  options.run_timeout_s = values["drill.run_timeout_s"].as<double>();
  check_launch_options(options);
  options.seed = uint64_t(values["drill.seed"].as<int64_t>());  // >= 0, checked when parsed
  // Kept within the option's range, so the printed seed can be given back to replay.
  if (options.seed == 0)
    options.seed = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) >> 1;
  options.external_kill = external_kill_from(values["drill.external_kill"].as<std::string>());
  options.on_node_loss = parse_node_loss_action(values["drill.on_node_loss"].as<std::string>());
  options.first_ranks = values["drill.ranks"].as<int>();
  options.reference_digest = values["drill.reference_digest"].as<std::string>();
  options.report_path = values["report"].as<std::string>();
  check_output_file("--report", options.report_path);  // before any run, not after all of them
  options.outputs = side_outputs_from(values, true);
  for (const FaultSpec& fault : options.train.faults)
    (fault.kind == FaultSpec::Kind::corrupt ? options.corrupt_faults : options.run_faults)
        .push_back(fault);
  check_corrupt_has_failure(options);
  check_relaunch_launcher(options.launcher, options.first_ranks, options.on_node_loss,
                          node_loss_possible(options));
  return options;
}

// checkpoint.dir/drill-<UTC time>-<pid>: a new folder, so a drill never touches earlier ones.
std::string create_drill_folder(const std::string& checkpoint_dir) {
  char stamp[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::gmtime(&now));
  const std::string folder = checkpoint_dir + "/drill-" + stamp + "-" + std::to_string(::getpid());
  std::error_code error;
  fs::create_directories(folder, error);
  if (error)
    throw UsageError("checkpoint.dir '" + checkpoint_dir + "': cannot create " + folder + ": " +
                     error.message());
  return folder;
}

// The same options without faults, in its own checkpoint folder. Returns the drill's exit code
// when the reference cannot give a digest, and fills `reference_report` otherwise.
std::optional<int> run_reference(DrillSupervisor& supervisor, std::vector<std::string> args,
                                 DrillResult& result, json& reference_report) {
  args.push_back("--checkpoint.dir=" + result.folder + "/reference");
  const DrillLaunch reference = supervisor.launch("reference", args, std::nullopt);
  result.runs.push_back({reference.name, reference.exit_code, reference.dir, reference.start_unix,
                         reference.end_unix});
  if (reference.exit_code == kExitUsage) {
    std::fprintf(stderr, "drill: the reference run rejected its input (exit 2):\n%s",
                 last_lines(reference.output_log(), 5).c_str());
    return kExitUsage;
  }
  if (!reference.report.is_object() || reference.exit_code > kExitFail) {
    std::fprintf(stderr, "drill: the reference run failed (exit %d); see %s/output.log:\n%s",
                 reference.exit_code, reference.dir.c_str(),
                 last_lines(reference.output_log(), 8).c_str());
    return kExitRuntime;
  }
  reference_report = reference.report;
  result.reference_digest = reference.report.at("train").at("final_digest").get<std::string>();
  return std::nullopt;
}

// The faulted launches: the first with --resume=none and every fault, each relaunch with
// --resume=auto and the faults not yet fired, until a launch ends with a report, rejects its
// input, fails without an injected fault, or drill.max_restarts is spent.
class FaultedRuns {
 public:
  FaultedRuns(const DrillOptions& options, DrillSupervisor& supervisor,
              std::vector<std::string> common, DrillResult& result)
      : options_(options),
        supervisor_(supervisor),
        common_(std::move(common)),
        faulted_dir_(result.folder + "/faulted"),
        result_(result),
        pending_(options.run_faults),
        pending_corrupt_(options.corrupt_faults) {
    std::mt19937_64 draw(options.seed);
    if (!options.external_kill.empty()) {
      const auto at_step =
          int64_t(2 + draw() % uint64_t(std::max<int64_t>(1, options.train.steps - 2)));
      external_ = ExternalKillPlan{at_step, draw(), options.external_kill == "node"};
    }
  }

  // Returns the last launch, whose report (if any) the drill's report extends.
  DrillLaunch run() {
    for (int attempt = 0;; ++attempt) {
      const DrillLaunch launched = launch(attempt);
      if (waiting_) settle_recovery(launched);
      const LaunchEnd end = launch_end(launched.exit_code, launched.report.is_object());
      if (end == LaunchEnd::rejected_input)
        result_.problems.push_back(launched.name +
                                   " rejected its input (exit 2), so it is not relaunched: " +
                                   last_lines(launched.output_log(), 1));
      if (end != LaunchEnd::failed || !record_failure(launched)) return launched;
      if (result_.restarts == options_.max_restarts) {
        give_up();
        return launched;
      }
      ++result_.restarts;
    }
  }

  void note_unused_external_kill() {
    if (external_ && !external_done_)
      result_.problems.push_back(
          "drill.external_kill: no run was still going when every rank had begun step " +
          std::to_string(external_->at_step) + ", so nothing was killed");
  }

 private:
  DrillLaunch launch(int attempt) {
    std::vector<std::string> args = common_;
    args.push_back("--checkpoint.dir=" + faulted_dir_);
    args.push_back(attempt == 0 ? "--resume=none" : "--resume=auto");
    for (const FaultSpec& fault : pending_) args.push_back("--fault=" + fault.origin);
    // The external kill strikes once, in the first launch that gets there.
    DrillLaunch launched = supervisor_.launch("run-" + std::to_string(attempt), args,
                                              external_done_ ? std::nullopt : external_);
    external_done_ = external_done_ || launched.external_kill.has_value();
    if (!launched.external_kill_failed.empty()) {
      result_.problems.push_back("drill.external_kill: " + launched.external_kill_failed);
      external_done_ = true;
    }
    result_.runs.push_back(
        {launched.name, launched.exit_code, launched.dir, launched.start_unix, launched.end_unix});
    return launched;
  }

  // The relaunch after the waiting failure shows how that failure was recovered from.
  void settle_recovery(const DrillLaunch& relaunch) {
    DrillFailure failure = std::move(*waiting_);
    waiting_.reset();
    const std::optional<RestoreProgress> progress = read_restore_progress(relaunch);
    failure.recovery = recovery_from(failure, progress, expected_restore_);
    if (failure.node_loss && progress) failure.node_loss->world_size_after = progress->world_size;
    if (auto problem = recovery_problem(failure, relaunch.dir))
      result_.problems.push_back(std::move(*problem));
    result_.failures.push_back(std::move(failure));
  }

  // Classifies a failed launch and readies the relaunch; false when no injected fault explains
  // the failure, which ends the drill.
  bool record_failure(const DrillLaunch& launched) {
    const LaunchEvidence evidence = read_launch_evidence(launched);
    std::optional<ClassifiedFailure> classified = classify_failure(evidence);
    if (!classified) {
      result_.problems.push_back(
          launched.name + " failed (exit " + std::to_string(launched.exit_code) +
          ") without an injected fault: " + telling_lines(launched.output_log()));
      return false;
    }
    if (classified->problem) result_.problems.push_back(std::move(*classified->problem));
    forget_fired(evidence.fired);
    std::fputs(fired_line(classified->failure).c_str(), stdout);
    std::fflush(stdout);
    if (!classified->failure.lost_ranks.empty() &&
        !plan_node_loss(classified->failure, evidence.heartbeats)) {
      result_.failures.push_back(std::move(classified->failure));
      return false;
    }
    prepare_relaunch();
    waiting_ = std::move(classified->failure);
    return true;
  }

  // The shape of every launch from here on, after `failure` took a node: drill.on_node_loss
  // decides it, and the supervisor's launcher carries it. False when no node is left.
  bool plan_node_loss(DrillFailure& failure, const std::vector<HeartbeatRecord>& heartbeats) {
    const LaunchShape before =
        launch_shape(heartbeats, shape_ ? shape_->excluded : std::vector<std::string>{});
    const int lost = lost_rank_count(failure, heartbeats);
    const LaunchShape after =
        shape_after_node_loss(before, failure.host.value_or(""), lost, options_.on_node_loss);
    failure.node_loss = NodeLossResponse{node_loss_action_name(options_.on_node_loss), before.ranks,
                                         std::nullopt, after.excluded, ""};
    if (after.ranks <= 0) {
      result_.problems.push_back("the lost host " + failure.host.value_or("?") +
                                 " ran every rank: no node is left to shrink to");
      return false;
    }
    std::string relaunch;
    try {
      relaunch = launcher_for(options_.launcher, after, options_.first_ranks);
    } catch (const RuntimeError& e) {
      result_.problems.push_back(e.what());
      return false;
    }
    written_ranks_ = before.ranks;
    shape_ = after;
    supervisor_.use_launcher(relaunch);
    failure.node_loss->launcher = supervisor_.launcher();
    std::fputs(node_loss_line(failure, lost, after).c_str(), stdout);
    drop_faults_beyond(after);
    std::fflush(stdout);
    return true;
  }

  // A fault not yet fired that names a rank beyond the smaller world, or a host left out, can
  // never fire in the relaunches (the run would refuse it, exit 2): it is dropped, and said so.
  void drop_faults_beyond(const LaunchShape& shape) {
    std::erase_if(pending_, [&](const FaultSpec& fault) {
      const bool gone_rank = fault.rank >= shape.ranks;
      const bool gone_host = fault.kind == FaultSpec::Kind::node &&
                             std::find(shape.excluded.begin(), shape.excluded.end(), fault.host) !=
                                 shape.excluded.end();
      if (!gone_rank && !gone_host) return false;
      const std::string why = gone_rank
                                  ? "the relaunch has " + std::to_string(shape.ranks) + " ranks"
                                  : std::string("its host is left out");
      std::printf("drill: %s is dropped: %s\n", fault.text.c_str(), why.c_str());
      return true;
    });
  }

  // Whether a corrupt fault's damage sets the newest checkpoint aside in the next restore. At
  // another world size whole replicas are read as "any one valid file" (docs/checkpoint.md), so
  // one damaged replica among several is covered by another and the newest still restores.
  bool damage_sets_newest_aside() const {
    const bool replicas = options_.train.checkpoint_layout == "file-per-rank" &&
                          !options_.train.checkpoint_shard_optimizer;
    const bool resized = shape_ && shape_->ranks != written_ranks_;
    return !(replicas && resized && written_ranks_ > 1);
  }

  // Each fault fires once per drill: a relaunch leaves out those that already fired.
  void forget_fired(const std::vector<FiredFault>& fired) {
    for (const FiredFault& record : fired)
      std::erase_if(pending_,
                    [&](const FaultSpec& fault) { return fault.origin == record.origin; });
  }

  // What the relaunch must restore; the corrupt faults damage the newest checkpoint now, at the
  // first failure that has one.
  void prepare_relaunch() {
    const auto committed = CheckpointStore::committed_in(faulted_dir_);  // newest first
    std::vector<int64_t> steps;
    for (const auto& [step, folder] : committed) steps.push_back(step);
    const bool corrupting = !committed.empty() && !pending_corrupt_.empty();
    expected_restore_ = expected_restore(steps, corrupting && damage_sets_newest_aside());
    if (corrupting) corrupt_newest(committed.front().second);
  }

  void corrupt_newest(const std::string& folder) {
    for (const FaultSpec& fault : pending_corrupt_) {
      const std::string file = corrupt_checkpoint(folder, fault);
      result_.corruptions.push_back({fault.text, folder, file});
      std::printf("drill: %s damaged %s\n", fault.text.c_str(), file.c_str());
    }
    pending_corrupt_.clear();
  }

  void give_up() {
    result_.problems.push_back("gave up after drill.max_restarts=" +
                               std::to_string(options_.max_restarts) + " relaunches");
    result_.failures.push_back(std::move(*waiting_));
    waiting_.reset();
  }

  const DrillOptions& options_;
  DrillSupervisor& supervisor_;
  const std::vector<std::string> common_;
  const std::string faulted_dir_;
  DrillResult& result_;
  std::vector<FaultSpec> pending_;
  std::vector<FaultSpec> pending_corrupt_;
  std::optional<ExternalKillPlan> external_;
  bool external_done_ = false;
  std::optional<DrillFailure> waiting_;      // a failure whose recovery the next launch shows
  std::optional<int64_t> expected_restore_;  // what that launch must restore
  std::optional<LaunchShape> shape_;         // after a lost node; unset: the launcher as given
  int written_ranks_ = 0;                    // the ranks of the launch that lost the node
};

// Writes the drill's report, prints the summary, and returns the exit code.
int publish(const Invocation& invocation, const DrillOptions& options, const DrillResult& result,
            const DrillLaunch& final_run, const std::string& started) {
  json report = drill_report(final_run.report, result,
                             DrillContext{run_id_for(invocation.options, started), started,
                                          utc_timestamp(), invocation.argv});
  record_strict(report, options.outputs);
  write_drill_trace(invocation.options, options.report_path, result, report);
  write_file_atomically(options.report_path, report.dump(2) + "\n");
  write_side_outputs(report, options.outputs);
  std::fputs(drill_summary(result, fs::absolute(options.report_path).string()).c_str(), stdout);
  std::fputs(trace_line(report).c_str(), stdout);
  std::fflush(stdout);
  if (final_run.exit_code == kExitUsage) return kExitUsage;
  return exit_code_under(report["verdict"].get<std::string>(), options.outputs);
}

}  // namespace

void read_drill_options(const po::variables_map& values) {
  drill_options_from(values);
}

int run_drill(const Invocation& invocation) {
  const DrillOptions options = drill_options_from(invocation.options);
  DrillResult result;
  result.launcher = options.launcher;
  result.seed = options.seed;
  result.folder = create_drill_folder(options.train.checkpoint_dir);
  std::printf("drill: folder %s, seed %llu (replay with --drill.seed=%llu)\n",
              result.folder.c_str(), static_cast<unsigned long long>(options.seed),
              static_cast<unsigned long long>(options.seed));
  const std::string started = utc_timestamp();
  DrillSupervisor supervisor(launcher_for(options.launcher, std::nullopt, options.first_ranks),
                             result.folder, options.run_timeout_s);
  const std::vector<std::string> common = forwarded_options(invocation.options);

  result.reference_digest = options.reference_digest;
  json reference_report;
  if (result.reference_digest.empty())
    if (const auto exit_code = run_reference(supervisor, common, result, reference_report))
      return *exit_code;

  FaultedRuns faulted(options, supervisor, common, result);
  const DrillLaunch final_run = faulted.run();
  faulted.note_unused_external_kill();

  result.final_digest = final_digest_of(final_run.report);
  result.proof_not_applicable =
      proof_not_applicable(reference_report, final_run.report, result.failures);
  const json& step_basis = reference_report.is_object() ? reference_report : final_run.report;
  decide_verdict(result, median_step_seconds(step_basis));
  return publish(invocation, options, result, final_run, started);
}

}  // namespace tp
