#pragma once
// What rank 0 learns from every rank at the end of a run, gathered in one place: each rank's
// typed facts (app/report/report.h RankInfo, its digest and loader figures), its step timings, and
// each host's GPU facts.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/report/report.h"
#include "app/stages/backend_selection.h"
#include "data/loader.h"
#include "mpi/world.h"
#include "train/step_loop.h"

namespace tp {

// Per-host GPU facts, from each host's first local rank: its inventory and the clock and
// persistence warnings its nvidia-smi gives.
struct HostGpuFacts {
  nlohmann::json gpus = nlohmann::json::array();
  std::vector<std::string> warnings;
};

struct RankFacts {
  RankInfo info;
  std::string digest;  // hex
  RankLoad load;       // zeros without a dataset
};

// Complete on rank 0; other ranks get empty vectors.
struct RunFacts {
  std::vector<RankFacts> ranks;                  // [rank]
  std::vector<std::vector<StepTiming>> timings;  // [rank][measured step]
  // [measured step][bucket]: minimum over ranks of each bucket's time
  std::vector<std::vector<double>> bucket_seconds;
  HostGpuFacts gpus;
  nlohmann::json communicators;  // rank 0: context.communicators (app/stages/comm_times.h)
};

// Collective; complete on rank 0.
HostGpuFacts gather_gpu_facts(const World& world, const Backends& backends);

// Collective.
RunFacts gather_run_facts(const World& world, const Backends& backends, const TrainResult& result,
                          double gemm_rate, const DatasetBatchSource* loader);

}  // namespace tp
