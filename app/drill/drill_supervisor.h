#pragma once
// Process supervision for `trainproof drill`: each launch of `train` is forked through /bin/sh in
// a process group of its own, waited for, ended when it runs past drill.run_timeout_s, and may
// lose a rank to the drill's own SIGKILL. The drill never calls MPI_Init, because Open MPI does
// not support starting mpirun from inside an MPI process (docs/architecture.md, "A drill").
#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "app/drill/drill_records.h"

namespace tp {

// When and whom drill.external_kill strikes.
struct ExternalKillPlan {
  int64_t at_step = 0;      // once every rank has begun this step
  uint64_t choice = 0;      // which rank, modulo the world size
  bool whole_node = false;  // drill.external_kill=node: every rank on that rank's host
};

// One launch of `train` through the user's launcher.
struct DrillLaunch {
  std::string name;  // reference, run-N
  std::string dir;   // its folder: command.txt, output.log, report.json, heartbeats/
  int exit_code = -1;
  double start_unix = 0;
  double end_unix = 0;
  std::optional<DrillExternalKill> external_kill;  // when the drill killed a rank itself
  std::string external_kill_failed;  // why the planned external kill could not be done
  bool timed_out = false;            // the drill ended it: nothing detected the failure
  nlohmann::json report;             // the report the launch wrote; null when none
  std::string heartbeats() const { return dir + "/heartbeats"; }
  std::string output_log() const { return dir + "/output.log"; }
};

class DrillSupervisor {
 public:
  // Makes drill_dir readable by its owner only (0700) and the process's umask 077, so that every
  // file the drill and the launches it starts write is 0600: they hold command lines,
  // environments and reports.
  DrillSupervisor(std::string launcher, std::string drill_dir, double run_timeout_s);

  // Runs `<launcher> trainproof train <args>` in drill_dir/<name>, with that folder's report and
  // heartbeat paths added, and returns when the launcher and everything it started have ended.
  // The command, redacted (app/report/redact.h), is printed and kept in command.txt.
  DrillLaunch launch(const std::string& name, const std::vector<std::string>& args,
                     const std::optional<ExternalKillPlan>& external);
  // The launcher of the launches from here on: a relaunch after a lost node (app/drill/
  // drill_launcher.h).
  void use_launcher(std::string launcher) { launcher_ = std::move(launcher); }
  const std::string& launcher() const { return launcher_; }

 private:
  std::string command_for(const DrillLaunch& run, const std::vector<std::string>& args) const;
  int wait_for(pid_t child, DrillLaunch& run, const std::optional<ExternalKillPlan>& external);
  void enforce_timeout(pid_t child, DrillLaunch& run, double& terminated_at) const;

  std::string launcher_;
  std::string drill_dir_;
  double run_timeout_s_;
};

}  // namespace tp
