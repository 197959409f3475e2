#pragma once
// The pairwise pass's measurements (docs/sweep.md, "Pairwise"): rounds of disjoint rank pairs,
// each pair timed in one direction, then the other, then both at once, with every transferred
// element checked (fabric/pair_buffers.h). Which ranks pair up (the tournament) is the caller's
// schedule; measuring a suspect again is fabric/pair_trials.h.
//
// Each transfer is bounded in time as well as in bytes: every pair first times a small probe, and a
// pair whose full transfer would take more than `time_factor` times the fastest pair's moves fewer
// bytes, so one slow link costs a round about twice a healthy one, not minutes.
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
  uint64_t bytes = 0;        // moved by one transfer (fewer than the plan's where time-bounded)
  uint64_t wrong = 0;        // elements of the last transfer that differ from what was sent
  double check_seconds = 0;  // the receiver's check of the last transfer (untimed in `seconds`)
  double gbps() const { return seconds > 0 ? double(bytes) / seconds / 1e9 : 0.0; }
};

struct PairPlan {
  uint64_t bytes = 64ull << 20;  // per transfer, at most
  int iters = 5;
  int warmup = 1;  // untimed transfers before each phase's timed ones
  uint64_t probe_bytes =
      4ull << 20;  // per probe: large enough that bandwidth, not latency, times it
  uint64_t floor_bytes = 1ull << 20;  // a time-bounded transfer never moves fewer
  double time_factor = 2.0;           // a pair's transfer may take this times the fastest pair's
  // The negative control (test.corrupt_sweep_rank): this rank flips a bit of each buffer it
  // received before checking it, so the check must find one wrong element per transfer.
  int corrupt_rank = -1;
  // The test hook test.slow_pair_rank: this rank waits bytes / slow_gbps before each transfer it
  // takes part in, so its rail looks like a link of that speed (a fault on one NIC, for tests).
  int slow_rank = -1;
  double slow_gbps = 0.05;
};

// The wait of the test hook above, where `me` is the slowed rank; none otherwise.
void pace_transfer(const PairPlan& plan, int me, uint64_t bytes);

// The elements a pair moves when a full transfer of `count` elements is estimated to take
// `estimate` seconds and the fastest pair's `typical`: all of them, or as many as fit in
// `time_factor` times the typical, and never fewer than `floor`.
uint64_t time_bounded_count(uint64_t count, uint64_t floor, double estimate, double typical,
                            double time_factor);

// Runs every round on every rank of `comm` (a rank outside a round's pairs waits at its barriers)
// and returns the transfers this rank received. `collective` spans the same ranks as `comm`.
// `on_round(done, rounds)` is called after each round, on every rank; `while_loaded` once per rank,
// right after its first timed transfers, while its links are still busy.
std::vector<PairTransfer> measure_rounds(
    Collective& collective, MPI_Comm comm, const std::vector<std::vector<RankPair>>& rounds,
    const PairPlan& plan, const std::function<void(size_t, size_t)>& on_round = nullptr,
    std::function<void()> while_loaded = nullptr);

}  // namespace tp
