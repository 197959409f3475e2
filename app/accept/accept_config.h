#pragma once
// `trainproof accept`'s options (accept.*, gate.*, --baseline), read and checked before MPI
// starts: the stages to run, and every threshold with where it came from (docs/acceptance.md).
#include <boost/program_options.hpp>
#include <map>
#include <string>
#include <vector>

#include "app/judge/thresholds.h"
#include "train/train_config.h"

namespace tp {

// The stages in the order they run; "drill" is never run by accept: report merge judges it.
inline const std::vector<std::string> kAcceptStages = {"preflight", "sweep", "pairwise", "train",
                                                       "restore"};

struct GateThreshold {
  Threshold threshold;  // threshold.check is the option's name after "gate."
  std::string stage;    // the stage that measures it
  std::string metric;   // what it measures, for the error that names the stage
  // Set by nobody (the default gate.min_straggler_score): advice, so missing it is WARN, not
  // FAIL. A threshold someone set is a gate.
  bool advisory = false;
};

struct AcceptConfig {
  std::vector<std::string> stages;  // selected, in kAcceptStages order
  std::vector<GateThreshold> thresholds;
  double warn_margin = 0.05;
  int retries = 0;
  int64_t busbw_bytes = int64_t(64) << 20;
  std::string expected_hash;  // gate.scenario_hash
  std::string baseline;       // --baseline FILE, or empty
  double tolerance = 0.9;
  double time_budget_s = 0;  // 0: none
  // accept.stage_time_s: a stage's own deadline in seconds, counted from its start.
  std::map<std::string, double> stage_time_s;
  bool runs(const std::string& stage) const;
};

// `sources` is Invocation::option_source: a threshold given nowhere is "the default".
// UsageError (exit 2) for an unknown stage, a threshold out of range, a threshold given for a
// stage that is not selected (naming the metric and the stage), and a restore stage that cannot
// check its digest.
AcceptConfig accept_config_from(const boost::program_options::variables_map& vm,
                                const std::map<std::string, std::string>& sources,
                                const TrainConfig& train);

// The thresholds as the report records them (gate.thresholds[], read again by report merge).
nlohmann::json thresholds_json(const AcceptConfig& config);

}  // namespace tp
