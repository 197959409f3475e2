#pragma once
// The training run's JSON report (its schema in app/report/gate.h; docs/report.md). build_report is
// a pure function of the typed records rank 0 gathered, so its arithmetic and verdict are
// unit-tested without MPI.
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "app/report/gate.h"
#include "checkpoint/store.h"
#include "common/stats.h"
#include "data/dataset.h"
#include "mpi/collective_check.h"
#include "train/step_loop.h"
#include "train/train_config.h"

namespace tp {

struct RankInfo {
  int rank = 0;
  std::string host;
  int local_rank = 0;
  std::string device;
  std::string cpu_affinity;
  std::string numa_nodes;
  std::string cpu_model;  // a drill's bit-exact proof across world sizes needs one model
  double gemm_rate_flops = 0;
  // The GPU it drives (empty uuid on the CPU backend).
  std::string gpu_uuid;
  std::string gpu_pci_bus_id;
  int gpu_numa_node = -1;  // -1: the kernel does not say
  std::string cuda_visible_devices;
  // The NIC its collective's traffic leaves by (fabric/rank_nic.h), "" when none can be named.
  std::string nic, nic_source;
  int nic_numa_node = -1;
};

// One rank's loader figures, when the run read a dataset (data.dir).
struct RankLoad {
  uint64_t bytes_read = 0;
  int64_t samples_read = 0;
  double reader_busy_s = 0;     // summed over the rank's reader threads
  double window_s = 0;          // from its first read's start to its last read's end
  uint64_t host_ram_bytes = 0;  // its host's RAM, from the host's first local rank only (else 0)
  std::string shards_read;      // "0,2": the shards it read, ascending
};

// The data section's inputs: the dataset, how it was read, and every rank's figures.
struct DataRecord {
  DatasetSpec dataset;
  std::vector<RankLoad> ranks;    // [rank]
  std::vector<double> cpu_share;  // [rank]: CPUs of its own (common/sysinfo.h cpu_shares)
};

struct RunRecord {
  TrainConfig config;
  nlohmann::json context;
  std::vector<RankInfo> ranks;
  std::vector<std::vector<StepTiming>> timings;  // [rank][measured step]
  // [measured step][bucket]: the bucket's time, minimum over ranks (app/report/report_buckets.h)
  std::vector<std::vector<double>> bucket_seconds;
  std::vector<std::string> digests;  // [rank], hex
  int64_t steps_run = 0;
  double first_step_end_unix = 0;  // rank 0's wall clock; a drill's RTO ends here
  std::optional<DataRecord> data;  // when data.dir was read
  std::optional<CheckpointRestore> restored;
  double checkpoint_final_wait_s = 0;  // async: the end of the run waiting for its last commit
  std::vector<CheckpointSave> saves;   // this process's checkpoints, in order
  std::optional<std::pair<std::string, int64_t>> preempted;  // signal name, last step
  CollectiveCheck collective;
  std::string comm_timing_method;
  std::vector<double> cpu_share;  // [rank]: CPUs of its own (common/sysinfo.h cpu_shares)
  // host -> why the topology preflight flags it (app/stages/topology_facts.h)
  std::map<std::string, std::vector<std::string>> topology_reasons;
  bool topology_measured = true;  // false with preflight.topology=false
};

nlohmann::json build_report(const RunRecord& run);
// The report's data section (part of build_report).
nlohmann::json data_json(const TrainConfig& config, const DataRecord& data);
// The report's checkpoint section (part of build_report); `stall` is the checkpoint phase's
// summary over every rank and step.
nlohmann::json checkpoint_json(const RunRecord& run, const nlohmann::json& stall);
// {min, p50, p99, max, mean}: how every section gives a distribution.
nlohmann::json summary_json(const Summary& summary);

}  // namespace tp
