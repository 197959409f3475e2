#pragma once
// The pairwise pass's measurements (docs/sweep.md, "Pairwise"): rounds of disjoint rank pairs,
// each pair timed in one direction, then the other, then both at once, with every transferred
// element checked. Which ranks pair up (the tournament, a second pass) is the caller's schedule.
//
// The check costs less than the transfer it checks: a sender's buffer is constant (its pattern,
// checked against the generator once), so the receiver compares an xxh3 digest of what arrived
// with the sender's digest, exchanged in 16 bytes per round. Only a transfer whose digest differs
// is compared element by element against the regenerated pattern, to count and place the damage.
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "mpi/collective.h"

namespace tp {

using RankPair = std::pair<int, int>;  // world ranks (a, b)

// How a transfer was timed: alone in one direction, or while the pair also sent the other way.
enum class PairMode { one_way, both_ways };

struct PairTransfer {
  int from = 0, to = 0;  // world ranks
  PairMode mode = PairMode::one_way;
  double seconds = 0;        // the receiver's median time of one transfer
  uint64_t bytes = 0;        // moved by one transfer
  uint64_t wrong = 0;        // elements of the last transfer that differ from what was sent
  double check_seconds = 0;  // the receiver's check of the last transfer (untimed in `seconds`)
  double gbps() const { return seconds > 0 ? double(bytes) / seconds / 1e9 : 0.0; }
};

struct PairPlan {
  uint64_t bytes = 64ull << 20;  // per transfer
  int iters = 5;
  int warmup = 1;
  // The negative control (test.corrupt_sweep_rank): this rank flips a bit of each buffer it
  // received before checking it, so the check must find one wrong element per transfer.
  int corrupt_rank = -1;
};

// Runs every round on every rank of `comm` (a rank outside a round's pairs waits at its barriers)
// and returns the transfers this rank received. `collective` spans the same ranks as `comm`.
// `on_round(done, rounds)` is called after each round, on every rank.
std::vector<PairTransfer> measure_rounds(
    Collective& collective, MPI_Comm comm, const std::vector<std::vector<RankPair>>& rounds,
    const PairPlan& plan, const std::function<void(size_t, size_t)>& on_round = nullptr);

}  // namespace tp
