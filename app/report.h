#pragma once
// The JSON report (schema "trainproof.report/1", DESIGN.md). build_report is a pure function of
// what rank 0 gathered, so its arithmetic and verdict are unit-tested without MPI.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/store.h"
#include "mpi/collective_check.h"
#include "train/step_loop.h"
#include "train/train_config.h"

namespace tp {

inline constexpr const char* kReportSchema = "trainproof.report/1";

struct RankInfo {
  int rank = 0;
  std::string host;
  int local_rank = 0;
  std::string device;
  std::string cpu_affinity;
  std::string numa_nodes;
  double gemm_rate_flops = 0;
};

struct RunRecord {
  TrainConfig config;
  nlohmann::json context;
  std::vector<RankInfo> ranks;
  std::vector<std::vector<StepTiming>> timings;  // [rank][measured step]
  std::vector<std::string> digests;              // [rank], hex
  int64_t steps_run = 0;
  double first_step_end_unix = 0;
  nlohmann::json data;  // the loader's section when data.dir was read; null else  // rank 0's wall
                        // clock; a drill's RTO ends here
  std::optional<CheckpointRestore> restored;
  double checkpoint_final_wait_s = 0;  // async: the end of the run waiting for its last commit
  std::vector<CheckpointSave> saves;   // this process's checkpoints, in order
  std::optional<std::pair<std::string, int64_t>> preempted;  // signal name, last step
  CollectiveCheck collective;
  std::string comm_timing_method;
};

nlohmann::json build_report(const RunRecord& run);

// Exit code for a verdict string: PASS and WARN are 0, FAIL is 1.
int exit_code_for(const std::string& verdict);

}  // namespace tp
