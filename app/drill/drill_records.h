#pragma once
// The typed records of a drill: what each launch did, each failure it suffered and how the
// relaunch recovered, and the drill's result. The supervisor and the classification fill them;
// the verdict reads them; drill_summary only formats them (docs/drills.md, "Reading the summary").
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tp {

// One rank that abort.json names as not having arrived.
struct WatchdogNamedRank {
  int rank = -1;
  std::optional<std::string> host;  // absent when the rank never wrote a heartbeat
  int64_t last_step = 0;
  std::string last_phase;
  double last_seen_unix = 0;
};

// What the launch after a failure recorded in its progress.json, written as it went, so it counts
// even when that launch fails in turn.
struct RestoreProgress {
  std::optional<int64_t> restored_step;  // absent: it started over
  std::optional<double> restore_gbps;
  std::optional<double> first_step_end_unix;  // absent: it never completed a step
  std::optional<int> world_size;              // its own; absent in a record that predates it
};

// How the launch after a failure recovered from it.
struct DrillRecovery {
  // False when the relaunch left no progress.json: nothing is known of its restore.
  bool recorded = false;
  std::optional<int64_t> restored_step;
  std::optional<int64_t> expected_restored_step;  // the newest valid checkpoint at the failure
  std::optional<double> restore_gbps;
  std::optional<double> rto_s;       // from the fault to the end of the relaunch's first step
  std::optional<int64_t> rpo_steps;  // last completed step minus the restored one
};

// A rank, or every rank of a node, the drill itself killed with SIGKILL (drill.external_kill).
struct DrillExternalKill {
  double unix_time = 0;
  int rank = -1;
  std::string host;
  std::vector<int> node_ranks;  // drill.external_kill=node: every rank killed, `rank` among them
};

// What the drill did about a lost node (docs/drills.md, "Losing a node").
struct NodeLossResponse {
  std::string action;  // shrink, spare or wait (drill.on_node_loss)
  int world_size_before = 0;
  std::optional<int> world_size_after;  // the relaunch's, from its progress record
  std::vector<std::string> excluded;    // the hosts every later launch leaves out
  std::string launcher;                 // the relaunch's launcher line
};

// One failed launch, and what caused it.
struct DrillFailure {
  std::string kind;   // kill, hang, stop, node, external-kill or external-node
  std::string fault;  // the spec ("random:seed=3 -> kill:..." when drawn), or the drill's own kill
  double fault_unix = 0;
  bool detected = false;
  bool timed_out = false;  // the drill's run timeout ended the launch
  // Where it struck: a kill's own record, or for a hang the watchdog's first named rank.
  std::optional<int> rank;
  std::optional<std::string> host;
  std::optional<int64_t> step;
  std::optional<std::string> phase;
  std::optional<std::vector<WatchdogNamedRank>> named_by_watchdog;  // hangs only
  std::vector<int> lost_ranks;                // node losses: every rank of the lost host
  std::optional<NodeLossResponse> node_loss;  // node losses: how the drill relaunched
  std::optional<int64_t> last_completed_step;
  int exit_code = -1;  // the launcher's
  std::string run;     // the launch's folder
  double detected_after_s = 0;
  std::optional<DrillRecovery> recovery;  // absent when no relaunch followed
};

// A corrupt fault the drill applied to a checkpoint between launches.
struct DrillCorruption {
  std::string fault;
  std::string folder;
  std::string file;
};

// One launch, as the report lists it.
struct DrillRunEntry {
  std::string name;
  int exit_code = -1;
  std::string dir;
  double start_unix = 0, end_unix = 0;  // the launcher's start and end
};

// The drill section of the report.
struct DrillResult {
  std::string launcher;
  std::string folder;
  uint64_t seed = 0;
  std::vector<DrillFailure> failures;
  std::vector<DrillCorruption> corruptions;
  int restarts = 0;
  std::string reference_digest;
  std::string final_digest;  // empty when no launch finished with a report
  bool digest_match = false;
  std::vector<DrillRunEntry> runs;
  std::vector<std::string> problems;  // empty: PASS
  std::optional<int64_t> rpo_steps;   // worst over the failures; absent without failures
  std::optional<double> rpo_s;
  std::optional<double> rto_s;  // worst over the failures that recorded one
  double redone_step_seconds = 0;
  // Why the final digest cannot equal the reference's by construction (a resize with a per-rank
  // batch, data.rank_shift, or mixed CPU models); empty when the bit-exact proof applies.
  std::string proof_not_applicable;
  std::string verdict;  // PASS, WARN (the proof does not apply) or FAIL
};

}  // namespace tp
