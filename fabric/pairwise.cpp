#include "fabric/pairwise.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>
#include <tuple>
#include <utility>

#include "common/clock.h"
#include "common/stats.h"
#include "fabric/pair_buffers.h"
#include "mpi/check.h"

namespace tp {
namespace {

// The peer of `rank` in this round, or -1 when it sits the round out.
int peer_in(const std::vector<RankPair>& round, int rank) {
  for (const RankPair& p : round) {
    if (p.first == rank) return p.second;
    if (p.second == rank) return p.first;
  }
  return -1;
}

struct Phase {
  int peer = -1;  // -1: this rank sits the round out
  bool sends = false, receives = false;
  PairMode mode = PairMode::one_way;
  bool active() const { return peer >= 0 && (sends || receives); }
};

// What a full transfer of each round is expected to take, from one probe per round and mode: this
// rank's estimates (infinite where it sits a round out), and the fastest pair's over the pass. The
// fastest, not the median: at 3 nodes a slow node is in 2 of the 3 pairs, and so is the median.
struct Estimates {
  std::vector<double> one_way, both_ways;  // [round], agreed by both ranks of the pair
  double fastest_one_way = 0, fastest_both_ways = 0;
};

// The quickest of three probes, after a smaller untimed one: the first transfers of a pair open its
// connection and grow its window, and a probe may meet a passing daemon (at 3 nodes one healthy
// pair's probes set the pass's fastest estimate alone).
double probe_seconds(Collective& c, const PairBuffers& b, const Phase& phase, uint64_t count,
                     uint64_t warm_count, const PairPlan& plan, int me) {
  const int to = phase.sends ? phase.peer : -1, from = phase.receives ? phase.peer : -1;
  c.run(b.call(to, from, warm_count));
  c.synchronize();
  double quickest = std::numeric_limits<double>::infinity();
  for (int i = 0; i < 3; ++i) {
    const double started = steady_seconds();
    pace_transfer(plan, me, count * 4);
    c.run(b.call(to, from, count));
    c.synchronize();
    quickest = std::min(quickest, steady_seconds() - started);
  }
  return quickest;
}

// The least over the ranks of `comm`, per mode.
std::pair<double, double> fastest_over_ranks(MPI_Comm comm, double one_way, double both_ways) {
  double mine[2] = {one_way, both_ways}, least[2] = {0, 0};
  mpiCheck(MPI_Allreduce(mine, least, 2, MPI_DOUBLE, MPI_MIN, comm));
  return {least[0], least[1]};
}

// Every round's pairs probed once each way, before any full transfer, so a slow pair is known
// before it is timed (its full transfers would take minutes on a path of megabytes a second).
Estimates probe_pass(Collective& c, MPI_Comm comm, const PairBuffers& b, int me,
                     const std::vector<std::vector<RankPair>>& rounds, uint64_t probe_count,
                     uint64_t floor_count, const PairPlan& plan) {
  Estimates e;
  const double scale = double(b.count()) / double(probe_count);
  for (const auto& round : rounds) {
    const int peer = peer_in(round, me);
    double one = std::numeric_limits<double>::infinity(), both = one;
    if (peer >= 0) {
      const bool low = me < peer;
      one = probe_seconds(c, b, {peer, low, !low, PairMode::one_way}, probe_count, floor_count,
                          plan, me);
      both = probe_seconds(c, b, {peer, true, true, PairMode::both_ways}, probe_count, floor_count,
                           plan, me);
      one = larger_of_pair(comm, one, peer) * scale;
      both = larger_of_pair(comm, both, peer) * scale;
    }
    e.one_way.push_back(one);
    e.both_ways.push_back(both);
    quiet_barrier(comm);
  }
  std::tie(e.fastest_one_way, e.fastest_both_ways) =
      fastest_over_ranks(comm, *std::min_element(e.one_way.begin(), e.one_way.end()),
                         *std::min_element(e.both_ways.begin(), e.both_ways.end()));
  return e;
}

// One phase of a round, every rank of `comm` taking part.
// `count`: the elements this pair moves, bounded by its probe against the fastest pair's.
PairTransfer transfer(Collective& c, MPI_Comm comm, PairBuffers& b, int me, const Phase& phase,
                      uint64_t count, const PairPlan& plan, std::function<void()>& while_loaded) {
  if (phase.receives && phase.active()) b.poison(count);
  const CollectiveCall call =
      b.call(phase.sends ? phase.peer : -1, phase.receives ? phase.peer : -1, count);
  for (int i = 0; phase.active() && i < plan.warmup; ++i) {
    c.run(call);
    c.synchronize();
  }
  quiet_barrier(comm);
  // Each transfer timed alone and the median kept: one transfer slowed by a passing daemon does
  // not make a link look slow.
  std::vector<double> each;
  for (int i = 0; phase.active() && i < plan.iters; ++i) {
    const double started = steady_seconds();
    pace_transfer(plan, me, count * 4);
    c.run(call);
    c.synchronize();
    each.push_back(steady_seconds() - started);
  }
  if (phase.active() && while_loaded) std::exchange(while_loaded, nullptr)();
  PairTransfer t{phase.peer, me, phase.mode, each.empty() ? 0.0 : median(each), count * 4, 0, 0};
  if (!phase.active()) return t;
  const Digest128 theirs = exchange_digest(comm, b.sent_digest(count), phase.peer);
  if (phase.receives) {
    const double started = steady_seconds();
    t.wrong = b.wrong_from(phase.peer, count, theirs);
    t.check_seconds = steady_seconds() - started;
  }
  return t;
}

}  // namespace

void pace_transfer(const PairPlan& plan, int me, uint64_t bytes) {
  if (me != plan.slow_rank || plan.slow_gbps <= 0) return;
  std::this_thread::sleep_for(std::chrono::duration<double>(double(bytes) / plan.slow_gbps / 1e9));
}

uint64_t time_bounded_count(uint64_t count, uint64_t floor, double estimate, double typical,
                            double time_factor) {
  if (!(estimate > time_factor * typical) || typical <= 0) return count;
  const double fits = double(count) * time_factor * typical / estimate;
  return std::min(count, std::max(floor, uint64_t(fits)));
}

std::vector<PairTransfer> measure_rounds(Collective& c, MPI_Comm comm,
                                         const std::vector<std::vector<RankPair>>& rounds,
                                         const PairPlan& plan,
                                         const std::function<void(size_t, size_t)>& on_round,
                                         std::function<void()> while_loaded) {
  int me = 0;
  MPI_Comm_rank(comm, &me);
  PairBuffers b(c, me, plan.bytes, plan.corrupt_rank);
  const uint64_t probe_count = std::max<uint64_t>(1, std::min(b.count(), plan.probe_bytes / 4));
  const uint64_t floor_count = std::max<uint64_t>(1, std::min(probe_count, plan.floor_bytes / 4));
  if (rounds.empty()) return {};
  const Estimates e = probe_pass(c, comm, b, me, rounds, probe_count, floor_count, plan);
  std::vector<PairTransfer> received;
  for (size_t r = 0; r < rounds.size(); ++r) {
    const int peer = peer_in(rounds[r], me);
    const bool low = peer >= 0 && me < peer;
    const uint64_t one = time_bounded_count(b.count(), floor_count, e.one_way[r], e.fastest_one_way,
                                            plan.time_factor);
    const uint64_t both = time_bounded_count(b.count(), floor_count, e.both_ways[r],
                                             e.fastest_both_ways, plan.time_factor);
    // Lower rank to higher, then higher to lower, then both at once.
    const PairTransfer forward =
        transfer(c, comm, b, me, {peer, low, !low, PairMode::one_way}, one, plan, while_loaded);
    const PairTransfer backward =
        transfer(c, comm, b, me, {peer, !low, low, PairMode::one_way}, one, plan, while_loaded);
    const PairTransfer both_ways =
        transfer(c, comm, b, me, {peer, true, true, PairMode::both_ways}, both, plan, while_loaded);
    if (on_round) on_round(r + 1, rounds.size());
    if (peer < 0) continue;
    received.push_back(low ? backward : forward);
    received.push_back(both_ways);
  }
  return received;
}

}  // namespace tp
