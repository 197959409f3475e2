#pragma once
// A sweep's report (docs/sweep.md, "The report"): the same contract as a training run's (schema,
// verdict, context, nodes[], gate.checks[]) with a `sweep` section instead of `train`. Built from
// typed records by a pure function, so its verdict is unit-tested without MPI.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/sweep_config.h"
#include "fabric/sweep_runner.h"

namespace tp {

// The ranks one result set was measured among, and its rows.
struct SweepGroupRecord {
  std::string name;  // "world", "node HOST", "rail K"
  std::vector<int> world_ranks;
  std::vector<SweepRow> rows;
};

struct SweepRecord {
  SweepConfig config;
  nlohmann::json context;
  std::string backend;                    // "mpi" or "nccl"
  std::vector<std::string> host_of_rank;  // [world rank]
  std::vector<std::string> hosts;         // in order of first rank
  std::vector<SweepGroupRecord> groups;
};

// One row of sweep.results[].
nlohmann::json sweep_row_json(const SweepRow& row, const std::string& group);
// The row back from its JSON (how rank 0 receives the other groups' rows).
SweepRow sweep_row_from_json(const nlohmann::json& row);

nlohmann::json build_sweep_report(const SweepRecord& record);

}  // namespace tp
