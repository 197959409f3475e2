#pragma once
// A sweep's report (docs/sweep.md, "The report"): the same contract as a training run's (schema,
// verdict, context, nodes[], gate.checks[]) with a `sweep` section instead of `train`. Built from
// typed records by a pure function, so its verdict is unit-tested without MPI.
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "app/stages/sweep_config.h"
#include "fabric/pair_judgement.h"
#include "fabric/pairwise.h"
#include "fabric/sweep_runner.h"

namespace tp {

// The ranks one result set was measured among, and its rows.
struct SweepGroupRecord {
  std::string name;  // "world", "node HOST", "rail K"
  std::vector<int> world_ranks;
  std::vector<SweepRow> rows;
};

// A first-pass suspect measured again, its transfers alternated with a control's (docs/sweep.md,
// "Confirming a flag"). Node indices are into the rail's nodes.
struct PairConfirmation {
  std::string kind;       // "node", "link", or "pair" (a pair below gate.min_pair_gbps)
  int node = -1;          // kind "node": the node under suspicion
  std::string direction;  // kind "node": "send" or "receive"
  PairMode mode = PairMode::one_way;
  int from = -1, to = -1;                           // the suspect transfer
  int control_from = -1, control_to = -1;           // the control transfer; -1: none exists
  double first_gbps = 0, first_reference_gbps = 0;  // the first pass's figures
  uint64_t bytes = 0, control_bytes = 0;            // per transfer
  int transfers = 0;                                // of each, alternated
  double gbps = -1, control_gbps = -1;              // their medians; -1: not measured
  double spread = 0, control_spread = 0;            // relative median absolute deviation of each
  double noise = 0;                                 // the relative spread a flag had to clear
  Confirmed outcome = Confirmed::transient;
  // Every flag and fail is measured a second time, and the milder of the two outcomes decides:
  // -1 when there was no second trial.
  double again_gbps = -1, again_control_gbps = -1;
  double again_noise = 0;
  // A trial below flag_fraction of its control whose noise was above PairLines::noise_bound(): the
  // measurement too unreliable for the noise rule to judge it (its own finding, pairwise_noise).
  bool unreliable = false;
  // The trial's place in the list measured (the worst suspects first); -1 when it had none.
  int trial = -1, again_trial = -1;
  // Not measured again because sweep.confirm_max or sweep.confirm_share ran out: `capped`, no
  // confirmation at all (an unconfirmed suspect); `again_capped`, no second trial (the first
  // decides alone).
  bool capped = false, again_capped = false;
};

// The pairwise pass over one rail: local rank `rail` of every node that has one (pair_ranks=node
// measures rail 0, the lowest rank of each node).
struct PairwiseRail {
  int rail = 0;
  std::vector<std::string> hosts;  // the nodes taking part, in world order
  std::vector<int> world_ranks;    // the rank measuring for each of them
  std::vector<std::string> nics;   // the NIC each of those ranks uses ("" when unknown); rank 0
  PairMatrix one_way, both_ways;   // [i][j]: GB/s from hosts[i] to hosts[j]; -1 on the diagonal
  // [i][j]: bytes per transfer, fewer than pair_bytes where the transfer was time-bounded
  std::vector<std::vector<uint64_t>> one_way_bytes, both_ways_bytes;
  PairJudgement judged_one_way, judged_both_ways;  // the first pass: suspects, not yet flags
  PairSpread spread_one_way, spread_both_ways;     // of the pairs of unsuspected nodes
  std::vector<PairConfirmation> confirmations;
};

struct PairwiseRecord {
  uint64_t pair_bytes = 0;
  int pair_iters = 0;
  int confirm_iters = 0;          // transfers of a suspect, and as many of its control
  double min_pair_gbps = 0;       // a one-way pair below it is measured again (gate.min_pair_gbps)
  PairLines lines;                // what the confirmations were judged against
  double seconds = 0;             // the whole pass on rank 0, confirmation included
  double confirm_seconds = 0;     // of which measuring suspects again
  double first_pass_seconds = 0;  // the rounds alone, before any suspect was measured again
  int confirm_max = 64;           // sweep.confirm_max: trials at most, first and second together
  double confirm_share = 2.0;     // sweep.confirm_share: of first_pass_seconds, for the trials
  std::vector<PairwiseRail> rails;
  // host -> what the node itself showed during the pass: InfiniBand ports whose error counters
  // grew, PCIe links below their speed while loaded
  std::map<std::string, std::vector<std::string>> node_reasons;
  uint64_t wrong = 0;       // elements received that differ from what was sent
  std::string first_wrong;  // "vc-n1 -> vc-n2 (one way): 3 wrong elements", or ""
};

struct SweepRecord {
  SweepConfig config;
  nlohmann::json context;
  std::string backend;                                               // "mpi" or "nccl"
  std::vector<std::string> host_of_rank;                             // [world rank]
  std::vector<std::string> hosts;                                    // in order of first rank
  std::map<std::string, std::vector<std::string>> topology_reasons;  // host -> why flagged
  bool topology_measured = true;           // false with preflight.topology=false
  std::vector<SweepGroupRecord> groups;    // sweep.mode=collectives
  std::optional<PairwiseRecord> pairwise;  // sweep.mode=pairwise
  // [world rank] {rank, host, pid, device, pci_bus_id, name}: sweep.devices[], for the tables'
  // "# Using devices" lines (complete on rank 0)
  nlohmann::json devices = nlohmann::json::array();
};

// Fewer timed iterations per row than this get a warning: p50 and p99 rest on few samples.
inline constexpr int kEnoughTimedIterations = 10;

// One row of sweep.results[].
nlohmann::json sweep_row_json(const SweepRow& row, const std::string& group);
// The row back from its JSON (how rank 0 receives the other groups' rows).
SweepRow sweep_row_from_json(const nlohmann::json& row);

nlohmann::json build_sweep_report(const SweepRecord& record);

}  // namespace tp
