#pragma once
// `trainproof accept`'s options (accept.*, gate.*, --baseline), read and checked before MPI
// starts: the stages to run, and every threshold with where it came from (docs/acceptance.md).
#include <boost/program_options.hpp>
#include <map>
#include <string>
#include <vector>

#include "app/judge/gate_config.h"
#include "train/train_config.h"

namespace tp {

// The stages in the order they run; "drill" is never run by accept: report merge judges it.
inline const std::vector<std::string> kAcceptStages = {"preflight", "sweep", "pairwise", "train",
                                                       "restore"};

// The gate's thresholds and the stages (GateConfig), with what only accept has.
struct AcceptConfig : GateConfig {
  int retries = 0;
  std::string expected_hash;  // gate.scenario_hash
  std::string baseline;       // --baseline FILE, or empty
  double tolerance = 0.9;
  double time_budget_s = 0;  // 0: none
  // accept.stage_time_s: a stage's own deadline in seconds, counted from its start.
  std::map<std::string, double> stage_time_s;
  // --level=full: the preflight burns every node (app/accept/accept_burn.h); health.burn_s.
  bool burn = false;
  double burn_s = 60;
  double sample_s = 1;  // health.sample_s: the NVML watch's interval over the stages
};

// `sources` is Invocation::option_source: a threshold given nowhere is "the default".
// UsageError (exit 2) for an unknown stage, a threshold out of range, a threshold given for a
// stage that is not selected (naming the metric and the stage), and a restore stage that cannot
// check its digest.
AcceptConfig accept_config_from(const boost::program_options::variables_map& vm,
                                const std::map<std::string, std::string>& sources,
                                const TrainConfig& train);

}  // namespace tp
