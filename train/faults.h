#pragma once
// Fault injection. Every fault kind is parsed from one spec syntax, `kind:key=value,...`, and fires
// through one hook, FaultInjector::at(step, phase), which the step loop calls at each phase
// boundary and the checkpoint store at its two checkpoint points. Before a kill, hang or stop
// takes effect the victim writes a fired-fault record (fault-rank-R.json) beside its heartbeat, so
// a drill knows when and where it fired; where a hang or a stop is *detected* comes from
// heartbeats only.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tp {

enum class Phase { data, compute, comm, optimizer };
const char* phase_name(Phase phase);

struct FaultSpec {
  // random is resolved into a kill or a node loss (resolve_random) before anything runs; corrupt
  // is applied by `trainproof drill` to a checkpoint between runs, never inside one. A node fault
  // is a kill of every rank on one host at the same instant (docs/drills.md, "Losing a node").
  enum class Kind { slow, kill, hang, stop, corrupt, random, node } kind = Kind::slow;
  std::string text;    // as given (a drawn kill: as drawn), for messages and the report
  std::string origin;  // the spec as the user gave it: text, or the random:seed=N it was drawn from
  int rank = -1;       // -1 for a node fault, which names its host instead
  std::string host;    // node: the host whose ranks all die
  std::optional<int64_t> step;  // unset: every step
  double ms = 0.0;
  // kill, stop, node: data|compute|comm|optimizer|ckpt-write|ckpt-commit; hang: a step phase
  std::string phase;
  std::string mode;           // corrupt: flip|truncate|delete
  uint64_t seed = 0;          // random
  bool may_draw_kill = true;  // random: kinds=kill (the default), node or kill+node
  bool may_draw_node = false;
};

// The phases a kill or a stop can name, in the order they happen within a step.
const std::vector<std::string>& kill_phases();

// Throws UsageError naming the spec and the offending key or value.
FaultSpec parse_fault(const std::string& text);
std::vector<FaultSpec> parse_faults(const std::vector<std::string>& texts);
// Throws UsageError for a fault that can never fire in this run: a rank outside the world, a host
// that runs none of its ranks, a step beyond the last one, or a checkpoint phase at a step that
// takes no checkpoint. `hosts`: the job's hosts in order of first rank.
void validate_faults(const std::vector<FaultSpec>& faults, int world_size, int64_t steps,
                     int64_t checkpoint_every, const std::vector<std::string>& hosts = {});
// The kill a `random:seed=N` fault stands for: rank, step and phase drawn from the seed, among
// those that can fire in this run; with kinds=kill+node, a node loss may be drawn instead (its
// host among `hosts`). Deterministic, so a failure replays from its seed; a seed without kinds
// draws the same kill it always drew.
FaultSpec resolve_random(const FaultSpec& random, int world_size, int64_t steps,
                         int64_t checkpoint_every, const std::vector<std::string>& hosts = {});

// A fired kill, hang, stop or node loss, as its victim recorded it.
struct FiredFault {
  std::string text, origin, kind, phase, host;
  int rank = -1;  // node: the rank that reached the point first and killed the node's ranks
  int64_t step = 0;
  double unix_time = 0;
  std::vector<int> node_ranks;  // node: every rank it killed, itself included
};
// Every fault-rank-*.json in `dir`.
std::vector<FiredFault> read_fired_faults(const std::string& dir);

// A process of this rank's node: a node fault kills them all.
struct NodeProcess {
  int rank = -1;
  int pid = 0;
};

class FaultInjector {
 public:
  // `record_dir`: where a kill, hang or stop records itself before it takes effect.
  FaultInjector(std::vector<FaultSpec> faults, int rank, std::string host, std::string record_dir);
  // Where a node fault finds the node's other ranks (train/heartbeat.h, node_processes); without
  // it, each rank of the node dies when it reaches the fault's point itself.
  void set_node_processes(std::function<std::vector<NodeProcess>()> list) {
    node_processes_ = std::move(list);
  }
  // The single hook: called by the step loop on entering each phase of each step.
  void at(int64_t step, Phase phase);
  // Called by the checkpoint store: "ckpt-write" midway through writing this rank's data,
  // "ckpt-commit" after its files are durable and before its checksum reaches rank 0 (on rank 0:
  // after the manifest, before the rename).
  void at_checkpoint(int64_t step, const char* point);
  bool empty() const { return mine_.empty(); }

 private:
  void fire(const FaultSpec& fault, int64_t step, const std::string& phase);

  std::vector<FaultSpec> mine_;  // only the faults aimed at this rank or its host
  std::string host_, record_dir_;
  std::function<std::vector<NodeProcess>()> node_processes_;
  int rank_;
};

}  // namespace tp
