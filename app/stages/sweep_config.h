#pragma once
// `trainproof sweep`'s options (sweep.*, comm.backend, test.corrupt_sweep_rank), read and checked
// before MPI starts; docs/sweep.md describes each.
#include <boost/program_options.hpp>
#include <cstdint>
#include <string>

#include "fabric/sweep_runner.h"

namespace tp {

struct SweepConfig {
  std::string mode = "collectives";  // or "pairwise"
  SweepPlan plan;                    // plan.corrupt_rank is a world rank here
  std::string split = "none";        // none, node, rail
  uint64_t pair_bytes = 64ull << 20;
  int pair_iters = 5;
  std::string pair_ranks = "rail";  // rail, node
  double flag_fraction = 0.8, fail_fraction = 0.5;
  double fail_floor = 0.1;        // below it a confirmed flag fails whatever the noise (PairLines)
  double confirm_below_gbps = 0;  // gate.min_pair_gbps: a pair below it is measured again
  // sweep.max_bytes=0: the largest size grows with the world size (fabric/sweep_runner.h
  // auto_sweep_max_bytes), set when the stage starts; sizes_note then says how it was chosen.
  bool auto_max_bytes = false;
  std::string sizes_note;
  int confirm_max = 64;        // trials of suspects at most, first and second together
  double confirm_share = 2.0;  // of the first pass's time, the most the trials may take
  int slow_pair_rank = -1;     // test.slow_pair_rank (world rank), paced to slow_pair_gbps
  double slow_pair_gbps = 0.05;
};

SweepConfig sweep_config_from(const boost::program_options::variables_map& options);

}  // namespace tp
