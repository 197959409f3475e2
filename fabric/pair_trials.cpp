#include "fabric/pair_trials.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "common/clock.h"
#include "common/stats.h"
#include "fabric/pair_buffers.h"

namespace tp {
namespace {

// This rank's part in one of a trial's two transfers.
struct Role {
  int peer = -1;  // -1: not in this transfer
  bool sends = false, receives = false;
  bool measures = false;  // the transfer's receiver (both ways, the pair's second rank)
  uint64_t count = 0;
  std::vector<double> seconds;  // each timed transfer, where this rank is the receiver
};

Role role_in(const RankPair& pair, PairMode mode, uint64_t bytes, int me) {
  Role role;
  const bool both = mode == PairMode::both_ways;
  if (pair.first == me) role = {pair.second, true, both, false, bytes / 4, {}};
  if (pair.second == me) role = {pair.first, both, true, true, bytes / 4, {}};
  return role;
}

void run_once(Collective& c, MPI_Comm comm, PairBuffers& b, Role& role, bool timed,
              const PairPlan& plan, int me) {
  if (role.peer < 0) return;
  const CollectiveCall call =
      b.call(role.sends ? role.peer : -1, role.receives ? role.peer : -1, role.count);
  pair_handshake(comm, role.peer);
  const double started = steady_seconds();
  pace_transfer(plan, me, role.count * 4);
  c.run(call);
  c.synchronize();
  if (timed) role.seconds.push_back(steady_seconds() - started);
}

double mad_of(const std::vector<double>& values, double middle) {
  std::vector<double> deviations;
  for (double v : values) deviations.push_back(std::fabs(v - middle));
  return deviations.empty() ? 0.0 : median(deviations);
}

// The last transfer checked (the peers' digests exchanged), and the figures of the transfer's
// receiver.
void finish(MPI_Comm comm, PairBuffers& b, const Role& role, int me, int trial, bool control,
            PairMode mode, std::vector<TrialTransfer>& out) {
  if (role.peer < 0) return;
  const Digest128 theirs = exchange_digest(comm, b.sent_digest(role.count), role.peer);
  if (!role.measures || role.seconds.empty()) return;
  TrialTransfer t;
  t.trial = trial;
  t.control = control;
  t.transfers = int(role.seconds.size());
  const double middle = median(role.seconds);
  t.mad_seconds = mad_of(role.seconds, middle);
  t.transfer = {role.peer, me, mode, middle, role.count * 4, 0, 0};
  const double started = steady_seconds();
  t.transfer.wrong = b.wrong_from(role.peer, role.count, theirs);
  t.transfer.check_seconds = steady_seconds() - started;
  out.push_back(t);
}

}  // namespace

std::vector<TrialTransfer> measure_trials(Collective& c, MPI_Comm comm,
                                          const std::vector<PairTrial>& trials,
                                          const PairPlan& plan,
                                          const std::function<bool(size_t, size_t)>& on_trial) {
  int me = 0;
  MPI_Comm_rank(comm, &me);
  uint64_t largest = 4;
  for (const PairTrial& t : trials) largest = std::max({largest, t.suspect_bytes, t.control_bytes});
  std::vector<TrialTransfer> received;
  if (trials.empty()) return received;
  PairBuffers b(c, me, largest, plan.corrupt_rank);
  for (size_t i = 0; i < trials.size(); ++i) {
    const PairTrial& trial = trials[i];
    Role suspect = role_in(trial.suspect, trial.mode, trial.suspect_bytes, me);
    Role control = role_in(trial.control, trial.mode, trial.control_bytes, me);
    for (int w = 0; w < plan.warmup; ++w)
      for (Role* role : {&suspect, &control}) run_once(c, comm, b, *role, false, plan, me);
    // One for one, the order turned each time (suspect, control, control, suspect, ...), so a
    // slow moment of the hosts or the fabric, or a cost of going first, falls on both alike. The
    // last of each is checked before the next transfer overwrites it.
    const int iters = std::max(1, plan.iters);
    for (int k = 0; k < iters; ++k)
      for (Role* role : k % 2 ? std::array{&control, &suspect} : std::array{&suspect, &control}) {
        const bool last = k + 1 == iters;
        if (last && role->receives) b.poison(role->count);
        run_once(c, comm, b, *role, true, plan, me);
        if (last) finish(comm, b, *role, me, int(i), role == &control, trial.mode, received);
      }
    quiet_barrier(comm);
    if (on_trial && !on_trial(i + 1, trials.size())) break;
  }
  return received;
}

}  // namespace tp
