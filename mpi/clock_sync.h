#pragma once
// A clock aligned to rank 0's, so arrival times at a collective can be compared across hosts whose
// steady clocks have unrelated epochs.
#include <mpi.h>

namespace tp {

class AlignedClock {
 public:
  // `local_offset_s` is added to this rank's raw clock: a test-only skew that alignment must undo.
  explicit AlignedClock(double local_offset_s = 0.0) : local_offset_s_(local_offset_s) {}

  double local_now() const;  // raw (possibly skewed) steady clock, seconds
  double now() const { return local_now() + offset_to_root_s_; }
  double offset_to_root_s() const { return offset_to_root_s_; }
  double uncertainty_s() const { return half_rtt_s_; }

  // Ping-pong with rank 0 (Cristian's algorithm): each round trip estimates rank 0's clock at the
  // midpoint; the round with the smallest round-trip time is kept. Collective over `comm`.
  void align(MPI_Comm comm, int rounds = 16);

 private:
  double local_offset_s_ = 0.0;
  double offset_to_root_s_ = 0.0;
  double half_rtt_s_ = 0.0;
};

}  // namespace tp
