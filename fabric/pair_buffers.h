#pragma once
// What the pairwise pass and its confirmation share (docs/sweep.md, "Pairwise"): a rank's send and
// receive buffers, the check of what arrived, and waits that leave the cores to the pair being
// measured.
//
// The check costs less than the transfer it checks: a sender's buffer is constant (its pattern,
// checked against the generator once), so the receiver compares an xxh3 digest of what arrived
// with the sender's digest of the same elements, exchanged in 16 bytes. Only a transfer whose
// digest differs is compared element by element against the regenerated pattern, to count the
// damage. Before each transfer that is checked, the receive buffer is filled with the receiver's
// own pattern, so a transfer that delivers nothing cannot pass on what an earlier one left.
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "common/digest.h"
#include "mpi/collective.h"

namespace tp {

class PairBuffers {
 public:
  // `bytes` per transfer at most; `corrupt_rank` is the negative control (test.corrupt_sweep_rank):
  // that rank flips a bit of what it received before checking it.
  PairBuffers(Collective& collective, int me, uint64_t bytes, int corrupt_rank);

  uint64_t count() const { return count_; }  // elements of a full transfer
  // Sends the first `count` elements to `send_to` and receives as many from `recv_from` (-1: none).
  CollectiveCall call(int send_to, int recv_from, uint64_t count) const;
  // The receive buffer's first `count` elements, overwritten with this rank's own pattern.
  void poison(uint64_t count);
  // This rank's digest of the first `count` elements it sends.
  Digest128 sent_digest(uint64_t count) const;
  // The elements of the last `count` received from `peer` that differ from what it sent (0 when
  // the digests agree).
  uint64_t wrong_from(int peer, uint64_t count, const Digest128& theirs);

 private:
  Collective& collective_;
  int me_ = 0, corrupt_rank_ = -1;
  uint64_t count_ = 0;
  std::shared_ptr<void> send_, recv_;
  std::vector<unsigned char> mine_;  // this rank's pattern, as the send buffer holds it
  std::vector<unsigned char> host_;  // what arrived, copied out for the check
  Digest128 sent_;                   // of all of mine_
};

// The peer's digest for mine (16 bytes each way); none when `peer` is -1.
Digest128 exchange_digest(MPI_Comm comm, const Digest128& mine, int peer);
// The larger of this rank's value and its peer's, the same on both.
double larger_of_pair(MPI_Comm comm, double mine, int peer);
// A zero-byte exchange: both ranks of a pair leave it together, so the next transfer's time on
// the receiver does not include waiting for its sender. Its waiter sleeps: in a confirmation, the
// rank waiting for its turn must not take a core from the transfer under way.
void pair_handshake(MPI_Comm comm, int peer);
// A barrier whose waiters sleep: a rank sitting a round out must not
// take a core from the pair being measured (on a host whose ranks outnumber its cores, a polling
// waiter would).
void quiet_barrier(MPI_Comm comm);

}  // namespace tp
