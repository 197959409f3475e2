#pragma once
// The [gate] thresholds a run is judged against, read once before MPI starts, with where each
// came from (docs/acceptance.md, "Checks"). `accept`, `train` and `sweep` read them alike, for the
// stages each runs: a threshold given on the command line that none of its stages measures is
// exit 2, one from a gate file or a scenario is judged n/a.
#include <boost/program_options.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/judge/thresholds.h"
#include "train/train_config.h"

namespace tp {

struct GateThreshold {
  Threshold threshold;  // threshold.check is the option's name after "gate."
  std::string stage;    // the stage that measures it
  std::string metric;   // what it measures, for the error that names the stage
  // "node" or "gpu" for a threshold stated per unit (gate.min_ckpt_write_gbps_per_node):
  // threshold.limit is then per unit, and the judge multiplies it by the job's count of them.
  std::string per;
  // Set by nobody (the default gate.min_straggler_score): advice, so missing it is WARN, not
  // FAIL. A threshold someone set is a gate.
  bool advisory = false;
};

struct GateConfig {
  std::vector<std::string> stages;  // the stages this run selects, in the order they run
  std::vector<GateThreshold> thresholds;
  double warn_margin = 0.05;
  int64_t busbw_bytes = int64_t(64) << 20;
  bool runs(const std::string& stage) const;
};

// The thresholds for a run of `stages`. `stages_named_by` says, in the error for a command-line
// threshold no stage measures, what chose the stages ("accept.stages", "trainproof train").
// UsageError (exit 2) for a threshold out of range and for one given on the command line that no
// selected stage measures (naming the metric and the stage).
GateConfig gate_config_from(const boost::program_options::variables_map& vm,
                            const std::map<std::string, std::string>& sources,
                            const TrainConfig& train, std::vector<std::string> stages,
                            const std::string& stages_named_by);

// Every threshold the gate knows, each with a limit nothing misses, for every stage: judged on a
// report, its checks carry every figure the report measured (report hostfile reads them so).
GateConfig every_gate_threshold(int64_t busbw_bytes);

// The thresholds as the report records them (gate.thresholds[], read again by report merge).
nlohmann::json thresholds_json(const GateConfig& config);

}  // namespace tp
