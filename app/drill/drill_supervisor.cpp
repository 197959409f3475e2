#include "app/drill/drill_supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "app/drill/drill_logic.h"
#include "common/clock.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/redact.h"
#include "common/sysinfo.h"
#include "train/heartbeat.h"

namespace tp {
namespace {

namespace fs = std::filesystem;

// A launch ended by the run timeout gets this long after SIGTERM before SIGKILL.
constexpr double kTerminateGraceS = 10.0;
constexpr auto kPollInterval = std::chrono::milliseconds(20);

std::string self_executable() {
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  return error ? std::string("trainproof") : self.string();
}

// Forks /bin/sh -c `command` with its output in `log`. The child gets its own process group, so
// that a timeout can end the launcher and every rank it started on this host.
pid_t spawn_in_own_group(const std::string& command, const std::string& log) {
  const pid_t child = ::fork();
  if (child < 0) throw EnvironmentError("drill: fork failed");
  if (child == 0) {
    ::setpgid(0, 0);
    if (std::freopen(log.c_str(), "w", stdout) == nullptr) ::_exit(127);
    ::dup2(::fileno(stdout), 2);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Also here: the parent may signal the group before the child has run its own setpgid.
  ::setpgid(child, child);
  return child;
}

// A file only its owner reads: mode 0600 even when it existed with another. A symlink at its name
// is refused (O_NOFOLLOW), never written through.
void write_private_file(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 || ::fchmod(fd, 0600) != 0) {
    const std::string reason = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw EnvironmentError("drill on " + host_name() + ": cannot write " + path + ": " + reason);
  }
  try {
    write_all(fd, text.data(), text.size(), path);
  } catch (const RuntimeError& e) {
    ::close(fd);
    throw EnvironmentError("drill on " + host_name() + ": " + e.what());
  }
  ::close(fd);
}

int exit_code_of(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Every rank has begun `step`, by its heartbeat.
bool every_rank_began(const std::vector<HeartbeatRecord>& heartbeats, int64_t step) {
  for (const HeartbeatRecord& heartbeat : heartbeats)
    if (!heartbeat.present || heartbeat.phase == "start" || heartbeat.step < step) return false;
  return true;
}

// Whether `pid` is a rank of `run`: its command line names the launch's heartbeat folder. Where
// the drill shares a process table with other hosts (a test bed of network namespaces), this is
// what makes a pid from another host safe to signal.
bool runs_this_launch(long pid, const DrillLaunch& run) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
  const std::string line{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return line.find("--watchdog.dir=" + run.heartbeats()) != std::string::npos;
}

// The process of `rank`, from the "host pid" file each rank writes beside its heartbeat; nullopt,
// with `why`, when this supervisor cannot signal it.
std::optional<pid_t> rank_process(const DrillLaunch& run, int rank, std::string& why) {
  std::ifstream pid_file(run.heartbeats() + "/pid-rank-" + std::to_string(rank));
  std::string host;
  long pid = 0;
  if (!(pid_file >> host >> pid) || pid <= 0) return std::nullopt;
  if (host == host_name() || runs_this_launch(pid, run)) return pid_t(pid);
  why = "rank " + std::to_string(rank) + " runs on " + host +
        ", which this supervisor cannot signal; under Slurm use scancel --signal=KILL on the job "
        "step instead, or a node fault (--fault node:host=H,step=S)";
  return std::nullopt;
}

// Kills one rank of `run`, or every rank of its host, with SIGKILL from outside once every rank
// has begun the planned step; records the kill, or why it could not be done, in `run`.
void try_external_kill(DrillLaunch& run, const ExternalKillPlan& plan) {
  const int ranks = heartbeat_ranks(run.heartbeats());
  if (ranks == 0) return;
  const std::vector<HeartbeatRecord> heartbeats = Heartbeat::read_all(run.heartbeats(), ranks);
  if (!every_rank_began(heartbeats, plan.at_step)) return;
  const int victim = int(plan.choice % uint64_t(ranks));
  // The node is the host as the job sees it (a pretend host in tests), from the heartbeats.
  const std::string node = heartbeats[size_t(victim)].host;
  std::vector<int> targets = {victim};
  if (plan.whole_node) {
    targets.clear();
    for (const HeartbeatRecord& heartbeat : heartbeats)
      if (heartbeat.host == node) targets.push_back(heartbeat.rank);
  }
  std::vector<pid_t> pids;
  for (const int rank : targets) {
    const std::optional<pid_t> pid = rank_process(run, rank, run.external_kill_failed);
    if (!run.external_kill_failed.empty()) return;
    if (!pid) return;  // its pid file is not there yet
    pids.push_back(*pid);
  }
  // All at once, as a node that loses power takes its ranks down together.
  const double killed_at = unix_seconds();
  for (size_t i = 0; i < pids.size(); ++i)
    if (::kill(pids[i], SIGKILL) != 0 && errno != ESRCH) {
      run.external_kill_failed = "kill(" + std::to_string(pids[i]) + ", SIGKILL) of rank " +
                                 std::to_string(targets[i]) + ": " + std::strerror(errno);
      return;
    }
  run.external_kill =
      DrillExternalKill{killed_at, victim, node, plan.whole_node ? targets : std::vector<int>{}};
}

}  // namespace

DrillSupervisor::DrillSupervisor(std::string launcher, std::string drill_dir, double run_timeout_s)
    : launcher_(std::move(launcher)),
      drill_dir_(std::move(drill_dir)),
      run_timeout_s_(run_timeout_s) {
  // Command lines, environments and reports may hold what the user would not show others.
  ::umask(077);
  std::error_code ignored;
  fs::permissions(drill_dir_, fs::perms::owner_all, fs::perm_options::replace, ignored);
}

std::string DrillSupervisor::command_for(const DrillLaunch& run,
                                         const std::vector<std::string>& args) const {
  std::vector<std::string> words = {self_executable(), "train"};
  words.insert(words.end(), args.begin(), args.end());
  words.push_back("--report=" + run.dir + "/report.json");
  words.push_back("--watchdog.dir=" + run.heartbeats());
  std::string command = launcher_;
  for (const std::string& word : words) command.append(1, ' ').append(shell_quote(word));
  return command;
}

DrillLaunch DrillSupervisor::launch(const std::string& name, const std::vector<std::string>& args,
                                    const std::optional<ExternalKillPlan>& external) {
  DrillLaunch run;
  run.name = name;
  run.dir = drill_dir_ + "/" + name;
  fs::create_directories(run.heartbeats());
  std::vector<std::string> words = args;
  // The supervisor watches for a step to begin on every rank: the nodes' files must follow it.
  const bool publish_given = std::any_of(args.begin(), args.end(), [](const std::string& w) {
    return w.rfind("--watchdog.publish_s=", 0) == 0;
  });
  if (external && !publish_given) words.push_back("--watchdog.publish_s=0.05");
  const std::string command = command_for(run, words);
  const std::string shown = redact_text(command);
  write_private_file(run.dir + "/command.txt", shown + "\n");
  std::printf("drill: %s: %s\n", name.c_str(), shown.c_str());
  std::fflush(stdout);

  run.start_unix = unix_seconds();
  const pid_t child = spawn_in_own_group(command, run.output_log());
  const int status = wait_for(child, run, external);
  // Nothing of this launch may outlive it and write into the checkpoint folder later.
  ::kill(-child, SIGKILL);
  run.end_unix = unix_seconds();
  run.exit_code = exit_code_of(status);
  run.report = read_json_file(run.dir + "/report.json");
  return run;
}

int DrillSupervisor::wait_for(pid_t child, DrillLaunch& run,
                              const std::optional<ExternalKillPlan>& external) {
  int status = 0;
  double terminated_at = 0;
  for (;;) {
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) return status;
    if (done < 0 && errno != EINTR)
      throw EnvironmentError(std::string("drill: waitpid: ") + std::strerror(errno));
    if (external && !run.external_kill && run.external_kill_failed.empty())
      try_external_kill(run, *external);
    enforce_timeout(child, run, terminated_at);
    std::this_thread::sleep_for(kPollInterval);
  }
}

void DrillSupervisor::enforce_timeout(pid_t child, DrillLaunch& run, double& terminated_at) const {
  const double now = unix_seconds();
  if (!run.timed_out && now - run.start_unix > run_timeout_s_) {
    // SIGTERM first, so mpirun or srun can take down remote ranks; SIGKILL if that fails.
    std::fprintf(stderr, "drill: %s ran past drill.run_timeout_s=%.0f; terminating it\n",
                 run.name.c_str(), run_timeout_s_);
    run.timed_out = true;
    terminated_at = now;
    ::kill(-child, SIGTERM);
  } else if (run.timed_out && terminated_at > 0 && now - terminated_at > kTerminateGraceS) {
    ::kill(-child, SIGKILL);
    terminated_at = 0;
  }
}

}  // namespace tp
