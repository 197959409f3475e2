#pragma once
// Measuring a first-pass suspect again (docs/sweep.md, "Confirming a flag"): its transfer and a
// control transfer of unsuspected nodes, alternated one for one, so both meet the same moment of
// the fabric and of the hosts. The control shares one node with the suspect transfer (the same
// receiver for a sender under suspicion, the same sender for a receiver), so the two differ only
// in the node or link under suspicion. Trials run one after another; ranks outside a trial wait.
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "fabric/pairwise.h"
#include "mpi/collective.h"

namespace tp {

struct PairTrial {
  RankPair suspect{-1, -1};  // (sender, receiver), world ranks
  RankPair control{-1, -1};  // (sender, receiver), or (-1, -1) where no control exists
  PairMode mode = PairMode::one_way;
  uint64_t suspect_bytes = 0, control_bytes = 0;
};

// What one receiver of a trial measured.
struct TrialTransfer {
  int trial = 0;
  bool control = false;
  PairTransfer transfer;   // the median of `transfers`
  double mad_seconds = 0;  // median absolute deviation of the transfers' times
  int transfers = 0;
};

// Runs every trial on every rank of `comm`, each pair's transfers `plan.iters` times after
// `plan.warmup` untimed ones, and returns what this rank received. `on_trial(done, trials)` is
// called after each trial, on every rank, and ends the trials where it returns false (it must
// answer the same on every rank).
std::vector<TrialTransfer> measure_trials(
    Collective& collective, MPI_Comm comm, const std::vector<PairTrial>& trials,
    const PairPlan& plan, const std::function<bool(size_t, size_t)>& on_trial = nullptr);

}  // namespace tp
