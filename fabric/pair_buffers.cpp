#include "fabric/pair_buffers.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "common/errors.h"
#include "fabric/sweep_data.h"
#include "mpi/check.h"

namespace tp {
namespace {

constexpr ElementType kType = ElementType::f32;
constexpr uint64_t kElementBytes = 4;

// What `sender` puts on the wire: its own pattern, so a receiver can check every element.
std::vector<unsigned char> pattern_of(int sender, uint64_t count) {
  std::vector<int64_t> values(count);
  for (uint64_t i = 0; i < count; ++i) values[i] = input_value(kType, 1, sender, i);
  return encode(kType, values);
}

// Waits for `request` with a sleep between tests.
void quiet_wait(MPI_Request& request) {
  for (int done = 0;;) {
    mpiCheck(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace

PairBuffers::PairBuffers(Collective& c, int me, uint64_t bytes, int corrupt_rank)
    : collective_(c), me_(me), corrupt_rank_(corrupt_rank), count_(bytes / kElementBytes) {
  send_ = c.allocate(count_ * kElementBytes);
  recv_ = c.allocate(count_ * kElementBytes);
  mine_ = pattern_of(me, count_);
  c.copy_in(send_.get(), mine_.data(), mine_.size());
  // The one check of the send buffer against the generator: every receiver's digest compares
  // against what it holds.
  sent_ = digest_of(mine_.data(), mine_.size());
  host_.resize(mine_.size());
  c.copy_out(host_.data(), send_.get(), host_.size());
  if (digest_of(host_.data(), host_.size()) != sent_)
    throw RuntimeError("pairwise: rank " + std::to_string(me) +
                       "'s send buffer differs from its pattern after the copy into place");
  // The receive buffer's pages and the host copy's, touched now rather than by the first check:
  // 64 MiB of fresh pages cost more than the digest itself.
  poison(count_);
}

CollectiveCall PairBuffers::call(int send_to, int recv_from, uint64_t count) const {
  CollectiveCall call;
  call.op = CollectiveOp::sendrecv;
  call.type = kType;
  call.send = send_.get();
  call.recv = recv_.get();
  call.send_count = call.recv_count = count;
  call.send_to = send_to;
  call.recv_from = recv_from;
  return call;
}

void PairBuffers::poison(uint64_t count) {
  collective_.copy_in(recv_.get(), mine_.data(), std::min(count, count_) * kElementBytes);
}

Digest128 PairBuffers::sent_digest(uint64_t count) const {
  return count >= count_ ? sent_ : digest_of(mine_.data(), count * kElementBytes);
}

uint64_t PairBuffers::wrong_from(int peer, uint64_t count, const Digest128& theirs) {
  const size_t bytes = std::min(count, count_) * kElementBytes;
  collective_.copy_out(host_.data(), recv_.get(), bytes);
  if (me_ == corrupt_rank_ && bytes > 0) host_[bytes / 2] ^= 0x40;
  if (digest_of(host_.data(), bytes) == theirs) return 0;
  std::vector<int64_t> expected(bytes / kElementBytes);
  for (uint64_t i = 0; i < expected.size(); ++i) expected[i] = input_value(kType, 1, peer, i);
  return count_wrong(kType, host_.data(), expected);
}

Digest128 exchange_digest(MPI_Comm comm, const Digest128& mine, int peer) {
  Digest128 theirs;
  if (peer < 0) return theirs;
  uint64_t out[2] = {mine.high, mine.low}, in[2] = {0, 0};
  mpiCheck(MPI_Sendrecv(out, 2, MPI_UINT64_T, peer, 7, in, 2, MPI_UINT64_T, peer, 7, comm,
                        MPI_STATUS_IGNORE));
  theirs.high = in[0];
  theirs.low = in[1];
  return theirs;
}

double larger_of_pair(MPI_Comm comm, double mine, int peer) {
  double theirs = mine;
  mpiCheck(MPI_Sendrecv(&mine, 1, MPI_DOUBLE, peer, 8, &theirs, 1, MPI_DOUBLE, peer, 8, comm,
                        MPI_STATUS_IGNORE));
  return std::max(mine, theirs);
}

void pair_handshake(MPI_Comm comm, int peer) {
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  mpiCheck(MPI_Irecv(nullptr, 0, MPI_BYTE, peer, 9, comm, &requests[0]));
  mpiCheck(MPI_Isend(nullptr, 0, MPI_BYTE, peer, 9, comm, &requests[1]));
  for (MPI_Request& request : requests) quiet_wait(request);
}

void quiet_barrier(MPI_Comm comm) {
  MPI_Request request = MPI_REQUEST_NULL;
  mpiCheck(MPI_Ibarrier(comm, &request));
  quiet_wait(request);
}

}  // namespace tp
