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
#include "fabric/sweep_runner.h"

namespace tp {

// The ranks one result set was measured among, and its rows.
struct SweepGroupRecord {
  std::string name;  // "world", "node HOST", "rail K"
  std::vector<int> world_ranks;
  std::vector<SweepRow> rows;
};

// A flagged node measured again against the best node of its rail, alone on the fabric.
struct PairRecheck {
  int node = 0, against = 0;                         // indices into the rail's nodes
  double send_gbps = 0, receive_gbps = 0;            // one direction at a time
  double both_send_gbps = 0, both_receive_gbps = 0;  // both at once
};

// The pairwise pass over one rail: local rank `rail` of every node that has one (pair_ranks=node
// measures rail 0, the lowest rank of each node).
struct PairwiseRail {
  int rail = 0;
  std::vector<std::string> hosts;  // the nodes taking part, in world order
  std::vector<int> world_ranks;    // the rank measuring for each of them
  PairMatrix one_way, both_ways;   // [i][j]: GB/s from hosts[i] to hosts[j]; -1 on the diagonal
  PairJudgement judged_one_way, judged_both_ways;
  std::vector<PairRecheck> second_pass;
};

struct PairwiseRecord {
  uint64_t pair_bytes = 0;
  int pair_iters = 0;
  std::vector<PairwiseRail> rails;
  // host -> its InfiniBand ports whose error counters grew during the pass
  std::map<std::string, std::vector<std::string>> counter_reasons;
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
  std::vector<SweepGroupRecord> groups;                              // sweep.mode=collectives
  std::optional<PairwiseRecord> pairwise;                            // sweep.mode=pairwise
};

// Fewer timed iterations per row than this get a warning: p50 and p99 rest on few samples.
inline constexpr int kEnoughTimedIterations = 10;

// One row of sweep.results[].
nlohmann::json sweep_row_json(const SweepRow& row, const std::string& group);
// The row back from its JSON (how rank 0 receives the other groups' rows).
SweepRow sweep_row_from_json(const nlohmann::json& row);

nlohmann::json build_sweep_report(const SweepRecord& record);

}  // namespace tp
