#include "fabric/pairwise.h"

#include <chrono>
#include <memory>
#include <thread>

#include "common/clock.h"
#include "common/digest.h"
#include "common/errors.h"
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
  Digest128 sent;  // of this rank's send buffer, as it lies where the transfers read it
  // Host memory a check reads what arrived into: allocated and touched once, as the pass starts,
  // so no check pays for fresh pages (64 MiB of them cost more than the digest itself).
  std::vector<unsigned char> host;
};

// The peer's digest of its send buffer, for this round (16 bytes each way); none when idle.
Digest128 exchange_digests(MPI_Comm comm, const Digest128& mine, int peer) {
  Digest128 theirs;
  if (peer < 0) return theirs;
  uint64_t out[2] = {mine.high, mine.low}, in[2] = {0, 0};
  mpiCheck(MPI_Sendrecv(out, 2, MPI_UINT64_T, peer, 7, in, 2, MPI_UINT64_T, peer, 7, comm,
                        MPI_STATUS_IGNORE));
  theirs.high = in[0];
  theirs.low = in[1];
  return theirs;
}

// Whether what arrived from `peer` is what it sent: the digests agree, or else the elements
// that differ from its pattern, counted.
uint64_t check_received(Collective& c, Buffers& b, int me, int peer, const Digest128& theirs,
                        const PairPlan& plan) {
  std::vector<unsigned char>& got = b.host;
  c.copy_out(got.data(), b.recv.get(), got.size());
  if (me == plan.corrupt_rank && !got.empty()) got[got.size() / 2] ^= 0x40;
  if (digest_of(got.data(), got.size()) == theirs) return 0;
  std::vector<int64_t> expected(b.count);
  for (uint64_t i = 0; i < b.count; ++i) expected[i] = input_value(kType, 1, peer, i);
  return count_wrong(kType, got.data(), expected);
}

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
PairTransfer transfer(Collective& c, MPI_Comm comm, Buffers& b, int me, int peer,
                      const Digest128& theirs, bool sends, bool receives, PairMode mode,
                      const PairPlan& plan) {
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
  PairTransfer t{peer, me, mode, each.empty() ? 0.0 : median(each), b.count * 4, 0, 0};
  if (receives && peer >= 0) {
    const double started = steady_seconds();
    t.wrong = check_received(c, b, me, peer, theirs, plan);
    t.check_seconds = steady_seconds() - started;
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
  // The one check of the send buffer against the generator: every receiver's digest compares
  // against this one.
  b.sent = digest_of(mine.data(), mine.size());
  b.host.resize(mine.size());
  c.copy_out(b.host.data(), b.send.get(), b.host.size());
  if (digest_of(b.host.data(), b.host.size()) != b.sent)
    throw RuntimeError("pairwise: rank " + std::to_string(me) +
                       "'s send buffer differs from its pattern after the copy into place");
  // The receive buffer's pages, touched now rather than by the first check that reads them.
  c.copy_in(b.recv.get(), b.host.data(), b.host.size());
  std::vector<PairTransfer> received;
  for (size_t r = 0; r < rounds.size(); ++r) {
    const std::vector<RankPair>& round = rounds[r];
    const int peer = peer_in(round, me);
    const bool low = peer >= 0 && me < peer;
    const Digest128 theirs = exchange_digests(comm, b.sent, peer);
    // Lower rank to higher, then higher to lower, then both at once.
    const PairTransfer forward =
        transfer(c, comm, b, me, peer, theirs, low, !low, PairMode::one_way, plan);
    const PairTransfer backward =
        transfer(c, comm, b, me, peer, theirs, !low, low, PairMode::one_way, plan);
    const PairTransfer both =
        transfer(c, comm, b, me, peer, theirs, true, true, PairMode::both_ways, plan);
    if (on_round) on_round(r + 1, rounds.size());
    if (peer < 0) continue;
    received.push_back(low ? backward : forward);
    received.push_back(both);
  }
  return received;
}

}  // namespace tp
