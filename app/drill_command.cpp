#include "app/drill_command.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <thread>

#include "app/build_info.h"
#include "app/drill_logic.h"
#include "app/report.h"
#include "app/summary.h"
#include "checkpoint/store.h"
#include "common/clock.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/sysinfo.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string self_executable() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("trainproof") : self.string();
}

json load_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nullptr;
  try {
    return json::parse(in);
  } catch (const json::exception&) {
    return nullptr;
  }
}

std::string tail_of(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) all.push_back(line);
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i)
    out += all[i] + "\n";
  return out;
}

// One launch of `train` through the user's launcher.
struct Launch {
  std::string dir;  // run-N/: report.json, output.log, heartbeats/
  int exit_code = -1;
  double start_unix = 0, end_unix = 0;
  std::optional<double> external_kill_unix;  // when the drill killed a rank itself
  int external_kill_rank = -1;
  std::string external_kill_host;
  std::string external_kill_failed;  // why the planned external kill could not be done
  bool timed_out = false;            // the drill ended it: nothing detected the failure
  json report;
  std::string heartbeats() const { return dir + "/heartbeats"; }
};

struct ExternalKill {
  int64_t at_step = 0;  // once every rank has begun this step
  uint64_t choice = 0;  // which rank, modulo the world size
};

class Supervisor {
 public:
  Supervisor(std::string launcher, std::string drill_dir, double run_timeout_s)
      : launcher_(std::move(launcher)),
        drill_dir_(std::move(drill_dir)),
        run_timeout_s_(run_timeout_s) {}

  Launch launch(const std::string& name, const std::vector<std::string>& args,
                const std::optional<ExternalKill>& external) {
    Launch run;
    run.dir = drill_dir_ + "/" + name;
    fs::create_directories(run.heartbeats());
    std::vector<std::string> words = {self_executable(), "train"};
    words.insert(words.end(), args.begin(), args.end());
    words.push_back("--report=" + run.dir + "/report.json");
    words.push_back("--watchdog.dir=" + run.heartbeats());
    std::string command = launcher_;
    for (const std::string& word : words) command.append(1, ' ').append(shell_quote(word));
    std::ofstream(run.dir + "/command.txt") << command << '\n';
    std::printf("drill: %s: %s\n", name.c_str(), command.c_str());
    std::fflush(stdout);

    run.start_unix = unix_seconds();
    const pid_t child = ::fork();
    if (child < 0) throw EnvironmentError("drill: fork failed");
    if (child == 0) {
      ::setpgid(0, 0);  // its own process group, so a timeout can end the launcher and its ranks
      const std::string log = run.dir + "/output.log";
      if (std::freopen(log.c_str(), "w", stdout) == nullptr) ::_exit(127);
      ::dup2(::fileno(stdout), 2);
      ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::setpgid(child, child);
    int status = 0;
    double terminated_at = 0;
    for (;;) {
      const pid_t done = ::waitpid(child, &status, WNOHANG);
      if (done == child) break;
      if (done < 0 && errno != EINTR)
        throw EnvironmentError(std::string("drill: waitpid: ") + std::strerror(errno));
      if (external && !run.external_kill_unix && run.external_kill_failed.empty())
        try_external_kill(run, *external);
      const double now = unix_seconds();
      if (!run.timed_out && now - run.start_unix > run_timeout_s_) {
        // SIGTERM first, so mpirun or srun can take down remote ranks; SIGKILL if that fails.
        std::fprintf(stderr, "drill: %s ran past drill.run_timeout_s=%.0f; terminating it\n",
                     name.c_str(), run_timeout_s_);
        run.timed_out = true;
        terminated_at = now;
        ::kill(-child, SIGTERM);
      } else if (run.timed_out && terminated_at > 0 && now - terminated_at > 10.0) {
        ::kill(-child, SIGKILL);
        terminated_at = 0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    // Nothing of this launch may outlive it and write into the checkpoint folder later.
    ::kill(-child, SIGKILL);
    run.end_unix = unix_seconds();
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    run.report = load_json(run.dir + "/report.json");
    return run;
  }

 private:
  // Kills one rank with SIGKILL from outside, once every rank has begun the chosen step; the
  // process is found from the pid file each rank writes beside its heartbeat.
  void try_external_kill(Launch& run, const ExternalKill& plan) {
    const int ranks = heartbeat_ranks(run.heartbeats());
    if (ranks == 0) return;
    const auto beats = Heartbeat::read_all(run.heartbeats(), ranks);
    for (const auto& h : beats)
      if (!h.present || h.phase == "start" || h.step < plan.at_step) return;
    const int victim = int(plan.choice % uint64_t(ranks));
    std::ifstream pid_file(run.heartbeats() + "/pid-rank-" + std::to_string(victim));
    std::string host;
    long pid = 0;
    if (!(pid_file >> host >> pid) || pid <= 0) return;
    if (host != host_name()) {
      run.external_kill_failed = "rank " + std::to_string(victim) + " runs on " + host +
                                 ", which this supervisor cannot signal; under Slurm use "
                                 "scancel --signal=KILL on the job step instead";
      return;
    }
    const double at = unix_seconds();
    if (::kill(pid_t(pid), SIGKILL) != 0) {
      run.external_kill_failed = "kill(" + std::to_string(pid) + ", SIGKILL) of rank " +
                                 std::to_string(victim) + ": " + std::strerror(errno);
      return;
    }
    run.external_kill_unix = at;
    run.external_kill_rank = victim;
    run.external_kill_host = host;
  }

  std::string launcher_, drill_dir_;
  double run_timeout_s_;
};

// A field as text, whatever its JSON type (null included).
std::string text_of(const json& j) {
  return j.is_string() ? j.get<std::string>() : j.dump();
}

std::string failure_line(const json& f) {
  char text[512];
  std::snprintf(text, sizeof text, "%-12s rank %s on %s, step %s %s: %s after %.2f s; restored %s",
                text_of(f["kind"]).c_str(), text_of(f["rank"]).c_str(), text_of(f["host"]).c_str(),
                text_of(f["step"]).c_str(), text_of(f["phase"]).c_str(),
                f.value("detected", false) ? "detected" : "NOT DETECTED",
                f.value("detected_after_s", 0.0), f["restored_step"].dump().c_str());
  return text;
}

}  // namespace

int run_drill(const Invocation& inv) {
  const po::variables_map& vm = inv.options;
  const TrainConfig cfg = train_config_from(vm);
  const std::string launcher = vm["launcher"].as<std::string>();
  if (launcher.empty())
    throw UsageError(
        "drill needs --launcher, the command that starts the ranks, for example "
        "--launcher \"mpirun -np 4\" or, inside an allocation, --launcher \"srun --mpi=pmix\"");
  if (cfg.checkpoint_dir.empty() || cfg.checkpoint_every <= 0)
    throw UsageError("drill needs checkpoint.dir and checkpoint.every > 0: it restores from them");
  const int max_restarts = vm["drill.max_restarts"].as<int>();
  if (max_restarts < 0)
    throw UsageError("drill.max_restarts must be >= 0, got " + std::to_string(max_restarts));
  const double run_timeout_s = vm["drill.run_timeout_s"].as<double>();
  if (!(run_timeout_s > 0))
    throw UsageError("drill.run_timeout_s must be > 0, got " + std::to_string(run_timeout_s));
  uint64_t seed = vm["drill.seed"].as<uint64_t>();
  if (seed == 0) seed = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  const bool external_kill = vm["drill.external_kill"].as<bool>();

  std::vector<FaultSpec> run_faults, corrupt_faults;
  for (const FaultSpec& f : cfg.faults)
    (f.kind == FaultSpec::Kind::corrupt ? corrupt_faults : run_faults).push_back(f);
  const bool will_fail =
      external_kill || std::any_of(run_faults.begin(), run_faults.end(), [](const FaultSpec& f) {
        return f.kind != FaultSpec::Kind::slow;
      });
  if (!corrupt_faults.empty() && !will_fail)
    throw UsageError("--fault '" + corrupt_faults.front().text +
                     "': corrupt damages the checkpoint a relaunch restores, so the drill needs a "
                     "failure too (a kill, hang or random fault, or drill.external_kill=true)");

  char stamp[64];
  const std::time_t t = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::gmtime(&t));
  const std::string drill_dir =
      cfg.checkpoint_dir + "/drill-" + stamp + "-" + std::to_string(::getpid());
  std::error_code ec;
  fs::create_directories(drill_dir, ec);
  if (ec)
    throw UsageError("checkpoint.dir '" + cfg.checkpoint_dir + "': cannot create " + drill_dir +
                     ": " + ec.message());
  std::printf("drill: folder %s, seed %llu (replay with --drill.seed=%llu)\n", drill_dir.c_str(),
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  const std::string started = utc_timestamp();
  Supervisor supervisor(launcher, drill_dir, run_timeout_s);
  const std::vector<std::string> common = forwarded_options(vm);
  std::vector<json> runs;

  // 1. The reference: the same options without faults, in its own checkpoint folder.
  std::string reference_digest = vm["drill.reference_digest"].as<std::string>();
  json reference_report;
  if (reference_digest.empty()) {
    std::vector<std::string> args = common;
    args.push_back("--checkpoint.dir=" + drill_dir + "/reference");
    const Launch ref = supervisor.launch("reference", args, std::nullopt);
    runs.push_back({{"name", "reference"}, {"exit_code", ref.exit_code}, {"dir", ref.dir}});
    if (ref.exit_code == kExitUsage) {
      std::fprintf(stderr, "drill: the reference run rejected its input (exit 2):\n%s",
                   tail_of(ref.dir + "/output.log", 5).c_str());
      return kExitUsage;
    }
    if (!ref.report.is_object() || ref.exit_code > kExitFail) {
      std::fprintf(stderr, "drill: the reference run failed (exit %d); see %s/output.log:\n%s",
                   ref.exit_code, ref.dir.c_str(), tail_of(ref.dir + "/output.log", 8).c_str());
      return kExitRuntime;
    }
    reference_report = ref.report;
    reference_digest = ref.report["train"]["final_digest"];
  }

  // 2. The faulted run, relaunched with --resume auto after each failure.
  const std::string faulted_dir = drill_dir + "/faulted";
  std::mt19937_64 draw(seed);
  std::optional<ExternalKill> external;
  bool external_done = false;  // the external kill strikes once, in the first run that gets there
  if (external_kill)
    external =
        ExternalKill{int64_t(2 + draw() % uint64_t(std::max<int64_t>(1, cfg.steps - 2))), draw()};
  std::vector<FaultSpec> pending = run_faults;
  std::vector<FaultSpec> pending_corrupt = corrupt_faults;
  json failures = json::array();
  json corruptions = json::array();
  std::vector<std::string> problems;
  std::optional<json> waiting;              // a failure whose restore the next launch shows
  std::optional<int64_t> expected_restore;  // what the relaunch must restore
  Launch final_run;
  int restarts = 0;
  for (int attempt = 0;; ++attempt) {
    std::vector<std::string> args = common;
    args.push_back("--checkpoint.dir=" + faulted_dir);
    args.push_back(attempt == 0 ? "--resume=none" : "--resume=auto");
    for (const FaultSpec& f : pending) args.push_back("--fault=" + f.origin);
    const Launch run = supervisor.launch("run-" + std::to_string(attempt), args,
                                         external_done ? std::nullopt : external);
    external_done = external_done || run.external_kill_unix.has_value();
    if (!run.external_kill_failed.empty()) {
      problems.push_back("drill.external_kill: " + run.external_kill_failed);
      external_done = true;
    }
    runs.push_back({{"name", "run-" + std::to_string(attempt)},
                    {"exit_code", run.exit_code},
                    {"dir", run.dir}});
    if (waiting) {
      // The relaunch's own record of what it restored and when its first step ended, written
      // as it went, so it counts even when this relaunch fails in turn.
      json& f = *waiting;
      const json progress = load_json(run.heartbeats() + "/progress.json");
      const bool known = progress.is_object();
      const json restored = known ? progress["restored_step"] : json(nullptr);
      f["restored_step"] = restored;
      if (known && progress["first_step_end_unix"].is_number())
        f["rto_s"] = progress["first_step_end_unix"].get<double>() - f.value("fault_unix", 0.0);
      if (known) f["restore_gbps"] = progress["restore_gbps"];
      if (f["last_completed_step"].is_number()) {
        const int64_t base = restored.is_number() ? restored.get<int64_t>() : 0;
        f["rpo_steps"] = f["last_completed_step"].get<int64_t>() - base;
      }
      f["expected_restored_step"] = expected_restore ? json(*expected_restore) : json(nullptr);
      if (!known)
        problems.push_back("the relaunch after " + f.value("kind", std::string("?")) +
                           " left no record of its restore (see " + run.dir + "/output.log)");
      else if (restored != f["expected_restored_step"])
        problems.push_back(
            "the relaunch after " + f.value("kind", std::string("?")) + " restored " +
            (restored.is_number() ? "step " + restored.dump() : std::string("nothing")) +
            (expected_restore ? "; step " + std::to_string(*expected_restore) +
                                    " was the newest valid checkpoint"
                              : "; no valid checkpoint existed"));
      failures.push_back(f);
      waiting.reset();
    }
    if (run.exit_code == kExitUsage) {
      problems.push_back("run-" + std::to_string(attempt) +
                         " rejected its input (exit 2), so it is not relaunched: " +
                         tail_of(run.dir + "/output.log", 1));
      final_run = run;
      break;
    }
    if (run.report.is_object() && (run.exit_code == kExitPass || run.exit_code == kExitFail)) {
      final_run = run;
      break;
    }

    // A failure: what fired, where, and how far the run got, from the evidence it left.
    json f;
    const auto fired = read_fired_faults(run.heartbeats());
    const int ranks = heartbeat_ranks(run.heartbeats());
    const auto beats = Heartbeat::read_all(run.heartbeats(), ranks);
    const json abort_record = load_json(run.heartbeats() + "/abort.json");
    const auto completed = last_completed_step(beats);
    f["last_completed_step"] = completed ? json(*completed) : json(nullptr);
    f["exit_code"] = run.exit_code;
    f["run"] = run.dir;
    if (!fired.empty()) {
      const FiredFault& x = fired.front();
      f["fault"] = x.origin == x.text ? x.text : x.origin + " -> " + x.text;
      f["kind"] = x.kind;
      f["fault_unix"] = x.unix_time;
      if (x.kind == "hang") {
        // Where the hang was detected comes from the watchdog's evidence, never the spec.
        const json missing = abort_record.is_object() ? abort_record["missing"] : json::array();
        f["detected"] = !missing.empty();
        f["rank"] = missing.empty() ? json(nullptr) : missing[0]["rank"];
        f["host"] = missing.empty() ? json(nullptr) : missing[0]["host"];
        f["step"] = missing.empty() ? json(nullptr) : missing[0]["last_step"];
        f["phase"] = missing.empty() ? json(nullptr) : missing[0]["last_phase"];
        f["named_by_watchdog"] = missing;
        bool named = false;
        for (const json& m : missing) named = named || m["rank"] == x.rank;
        if (!named)
          problems.push_back("the watchdog did not name rank " + std::to_string(x.rank) +
                             ", which hung (abort.json: " +
                             (abort_record.is_object() ? abort_record.dump() : "absent") + ")");
      } else {
        f["detected"] = true;
        f["rank"] = x.rank;
        f["host"] = x.host;
        f["step"] = x.step;
        f["phase"] = x.phase;
      }
      for (const FiredFault& y : fired)
        pending.erase(std::remove_if(pending.begin(), pending.end(),
                                     [&](const FaultSpec& p) { return p.origin == y.origin; }),
                      pending.end());
    } else if (run.external_kill_unix) {
      f["kind"] = "external-kill";
      f["fault"] = "SIGKILL from the drill";
      f["fault_unix"] = *run.external_kill_unix;
      f["detected"] = true;
      f["rank"] = run.external_kill_rank;
      f["host"] = run.external_kill_host;
      if (size_t(run.external_kill_rank) < beats.size()) {
        f["step"] = beats[size_t(run.external_kill_rank)].step;
        f["phase"] = beats[size_t(run.external_kill_rank)].phase;
      }
    } else {
      problems.push_back("run-" + std::to_string(attempt) + " failed (exit " +
                         std::to_string(run.exit_code) +
                         ") without an injected fault: " + tail_of(run.dir + "/output.log", 1));
      final_run = run;
      break;
    }
    f["detected_after_s"] = run.end_unix - f.value("fault_unix", run.end_unix);
    if (run.timed_out) {
      // The drill's own timeout ended the launch: the job never noticed the failure itself.
      f["detected"] = false;
      f["timed_out"] = true;
    }
    std::printf("drill: %s fired on rank %s, step %s %s; launcher exited %d after %.2f s\n",
                text_of(f["fault"]).c_str(), text_of(f["rank"]).c_str(), text_of(f["step"]).c_str(),
                text_of(f["phase"]).c_str(), run.exit_code, f["detected_after_s"].get<double>());
    std::fflush(stdout);

    // The relaunch must restore the newest committed checkpoint, or the one before it when a
    // corrupt fault damages the newest now.
    const auto committed = CheckpointStore::committed_in(faulted_dir);  // newest first
    expected_restore =
        committed.empty() ? std::nullopt : std::optional<int64_t>(committed.front().first);
    if (!committed.empty() && !pending_corrupt.empty()) {
      const std::string& folder = committed.front().second;
      for (const FaultSpec& c : pending_corrupt) {
        const std::string file = corrupt_checkpoint(folder, c);
        corruptions.push_back({{"fault", c.text}, {"folder", folder}, {"file", file}});
        std::printf("drill: %s damaged %s\n", c.text.c_str(), file.c_str());
      }
      pending_corrupt.clear();
      expected_restore =
          committed.size() > 1 ? std::optional<int64_t>(committed[1].first) : std::nullopt;
    }
    waiting = f;
    if (restarts == max_restarts) {
      problems.push_back("gave up after drill.max_restarts=" + std::to_string(max_restarts) +
                         " relaunches");
      failures.push_back(f);
      final_run = run;
      break;
    }
    ++restarts;
  }

  if (external && !external_done)
    problems.push_back(
        "drill.external_kill: no run was still going when every rank had begun step " +
        std::to_string(external->at_step) + ", so nothing was killed");
  // 3. The verdict: the final state must be the reference's, and every failure recovered.
  const std::string final_digest =
      final_run.report.is_object() ? final_run.report["train"].value("final_digest", "") : "";
  const bool match = !final_digest.empty() && final_digest == reference_digest;
  for (const json& f : failures)
    if (!f.value("detected", false))
      problems.push_back(f.value("kind", std::string("?")) + " was not detected");
  if (!match)
    problems.push_back(final_digest.empty()
                           ? "the drill never finished a run"
                           : "final digest " + final_digest + " differs from the reference " +
                                 reference_digest);
  const json& basis = reference_report.is_object() ? reference_report : final_run.report;
  const double step_p50 =
      basis.is_object() ? basis["train"]["phases"]["step"].value("p50", 0.0) : 0.0;
  json drill{{"launcher", launcher},
             {"folder", drill_dir},
             {"seed", seed},
             {"failures", failures},
             {"corruptions", corruptions},
             {"restarts", restarts},
             {"reference_digest", reference_digest},
             {"final_digest", final_digest},
             {"digest_match", match},
             {"runs", runs},
             {"problems", problems}};
  int64_t rpo_steps = 0;
  double rto = 0;
  bool any_rto = false;
  for (const json& f : failures) {
    rpo_steps = std::max(rpo_steps, f.value("rpo_steps", int64_t(0)));
    if (f.contains("rto_s")) {
      rto = std::max(rto, f["rto_s"].get<double>());
      any_rto = true;
    }
  }
  drill["rpo_steps"] = failures.empty() ? json(nullptr) : json(rpo_steps);
  drill["rpo_s"] = failures.empty() ? json(nullptr) : json(double(rpo_steps) * step_p50);
  drill["rto_s"] = any_rto ? json(rto) : json(nullptr);
  int64_t redone = 0;
  for (const json& f : failures) redone += f.value("rpo_steps", int64_t(0));
  drill["redone_step_seconds"] = double(redone) * step_p50;
  drill["verdict"] = problems.empty() ? "PASS" : "FAIL";

  json report = final_run.report.is_object() ? final_run.report : json::object();
  report["schema"] = kReportSchema;
  report["drill"] = drill;
  report["context"]["drill"] = {
      {"started", started}, {"ended", utc_timestamp()}, {"command_line", inv.argv}};
  json check{{"name", "drill"},
             {"value", drill["verdict"]},
             {"threshold", "digest match, every failure detected and restored"},
             {"status", problems.empty() ? "pass" : "fail"},
             {"reason", problems.empty() ? "final digest matches the reference after " +
                                               std::to_string(failures.size()) + " failure(s)"
                                         : problems.front()}};
  if (!report.contains("gate")) report["gate"] = {{"checks", json::array()}};
  report["gate"]["checks"].push_back(check);
  const std::string final_verdict = !problems.empty() ? "FAIL" : report.value("verdict", "PASS");
  report["verdict"] = final_verdict;
  const std::string path = vm["report"].as<std::string>();
  write_file_atomically(path, report.dump(2) + "\n");

  std::printf("\ndrill summary (%s)\n", drill_dir.c_str());
  if (failures.empty()) std::printf("  no failures injected\n");
  for (const json& f : failures) std::printf("  %s\n", failure_line(f).c_str());
  for (const json& c : corruptions)
    std::printf("  corrupt    %s -> %s\n", c["fault"].get<std::string>().c_str(),
                c["file"].get<std::string>().c_str());
  std::printf("  restarts %d; RPO %s steps (%s s); RTO %s s\n", restarts,
              drill["rpo_steps"].dump().c_str(), drill["rpo_s"].dump().c_str(),
              drill["rto_s"].dump().c_str());
  std::printf("  digest: reference %s, final %s: %s\n", reference_digest.c_str(),
              final_digest.empty() ? "none" : final_digest.c_str(), match ? "MATCH" : "DIFFER");
  for (const std::string& p : problems) std::printf("  problem: %s\n", p.c_str());
  std::printf("drill verdict: %s\nreport: %s\n", drill["verdict"].get<std::string>().c_str(),
              fs::absolute(path).string().c_str());
  std::fflush(stdout);
  const bool usage = final_run.exit_code == kExitUsage;
  return usage ? kExitUsage : exit_code_for(final_verdict);
}

}  // namespace tp
