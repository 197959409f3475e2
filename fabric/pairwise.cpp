#include "fabric/pairwise.h"

#include <chrono>
#include <memory>
#include <thread>

#include "common/clock.h"
#include "common/stats.h"
#include "fabric/sweep_data.h"
#include "mpi/check.h"

namespace tp {
namespace {

constexpr ElementType kType = ElementType::f32;

// What `sender` puts on the wire: its own pattern, so a receiver can check every element.
std::vector<unsigned char> pattern_of(int sender, uint64_t count) {
  std::vector<int64_t> values(count);
  for (uint64_t i = 0; i < count; ++i) values[i] = input_value(kType, 1, sender, i);
  return encode(kType, values);
}

struct Buffers {
  std::shared_ptr<void> send, recv;
  uint64_t count = 0;
};

// The peer of `rank` in this round, or -1 when it sits the round out.
int peer_in(const std::vector<RankPair>& round, int rank) {
  for (const RankPair& p : round) {
    if (p.first == rank) return p.second;
    if (p.second == rank) return p.first;
  }
  return -1;
}

// A barrier whose waiters sleep: a rank sitting a round out must not take the CPU from the pair
// being measured (on a host whose ranks outnumber its cores, a polling waiter would).
void quiet_barrier(MPI_Comm comm) {
  MPI_Request request = MPI_REQUEST_NULL;
  mpiCheck(MPI_Ibarrier(comm, &request));
  for (int done = 0;;) {
    mpiCheck(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// One phase of a round: `sends` and `receives` say which way this rank's data flows.
PairTransfer transfer(Collective& c, MPI_Comm comm, const Buffers& b, int me, int peer, bool sends,
                      bool receives, PairMode mode, const PairPlan& plan) {
  CollectiveCall call;
  call.op = CollectiveOp::sendrecv;
  call.type = kType;
  call.send = b.send.get();
  call.recv = b.recv.get();
  call.send_count = call.recv_count = b.count;
  call.send_to = sends ? peer : -1;
  call.recv_from = receives ? peer : -1;
  const bool active = peer >= 0 && (sends || receives);
  for (int i = 0; active && i < plan.warmup; ++i) c.run(call);
  if (active) c.synchronize();
  quiet_barrier(comm);
  // Each transfer timed alone and the median kept: one transfer slowed by a passing daemon does
  // not make a link look slow.
  std::vector<double> each;
  for (int i = 0; active && i < plan.iters; ++i) {
    const double started = steady_seconds();
    c.run(call);
    c.synchronize();
    each.push_back(steady_seconds() - started);
  }
  PairTransfer t{peer, me, mode, each.empty() ? 0.0 : median(each), b.count * 4, 0};
  if (receives && peer >= 0) {
    std::vector<unsigned char> got(b.count * 4);
    c.copy_out(got.data(), b.recv.get(), got.size());
    std::vector<int64_t> expected(b.count);
    for (uint64_t i = 0; i < b.count; ++i) expected[i] = input_value(kType, 1, peer, i);
    t.wrong = count_wrong(kType, got.data(), expected);
  }
  return t;
}

}  // namespace

std::vector<PairTransfer> measure_rounds(Collective& c, MPI_Comm comm,
                                         const std::vector<std::vector<RankPair>>& rounds,
                                         const PairPlan& plan,
                                         const std::function<void(size_t, size_t)>& on_round) {
  int me = 0;
  MPI_Comm_rank(comm, &me);
  Buffers b;
  b.count = plan.bytes / 4;
  b.send = c.allocate(b.count * 4);
  b.recv = c.allocate(b.count * 4);
  const std::vector<unsigned char> mine = pattern_of(me, b.count);
  c.copy_in(b.send.get(), mine.data(), mine.size());
  std::vector<PairTransfer> received;
  for (size_t r = 0; r < rounds.size(); ++r) {
    const std::vector<RankPair>& round = rounds[r];
    const int peer = peer_in(round, me);
    const bool low = peer >= 0 && me < peer;
    // Lower rank to higher, then higher to lower, then both at once.
    const PairTransfer forward = transfer(c, comm, b, me, peer, low, !low, PairMode::one_way, plan);
    const PairTransfer backward =
        transfer(c, comm, b, me, peer, !low, low, PairMode::one_way, plan);
    const PairTransfer both = transfer(c, comm, b, me, peer, true, true, PairMode::both_ways, plan);
    if (on_round) on_round(r + 1, rounds.size());
    if (peer < 0) continue;
    received.push_back(low ? backward : forward);
    received.push_back(both);
  }
  return received;
}

}  // namespace tp
