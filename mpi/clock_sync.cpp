#include "mpi/clock_sync.h"

#include <chrono>
#include <limits>

#include "common/clock.h"
#include "mpi/check.h"

namespace tp {

double AlignedClock::local_now() const {
  return steady_seconds() + local_offset_s_;
}

void AlignedClock::align(MPI_Comm comm, int rounds) {
  int rank = 0, size = 1;
  mpiCheck(MPI_Comm_rank(comm, &rank));
  mpiCheck(MPI_Comm_size(comm, &size));
  const int tag = 7411;
  offset_to_root_s_ = 0.0;
  half_rtt_s_ = 0.0;
  if (rank == 0) {
    for (int peer = 1; peer < size; ++peer)
      for (int round = 0; round < rounds; ++round) {
        double ping = 0.0;
        mpiCheck(MPI_Recv(&ping, 1, MPI_DOUBLE, peer, tag, comm, MPI_STATUS_IGNORE));
        const double root_time = local_now();
        mpiCheck(MPI_Send(&root_time, 1, MPI_DOUBLE, peer, tag, comm));
      }
  } else {
    double best_rtt = std::numeric_limits<double>::infinity();
    for (int round = 0; round < rounds; ++round) {
      const double sent = local_now();
      double root_time = 0.0;
      mpiCheck(MPI_Send(&sent, 1, MPI_DOUBLE, 0, tag, comm));
      mpiCheck(MPI_Recv(&root_time, 1, MPI_DOUBLE, 0, tag, comm, MPI_STATUS_IGNORE));
      const double received = local_now();
      if (received - sent < best_rtt) {
        best_rtt = received - sent;
        offset_to_root_s_ = root_time - 0.5 * (sent + received);
      }
    }
    half_rtt_s_ = 0.5 * best_rtt;
  }
  mpiCheck(MPI_Barrier(comm));
}

}  // namespace tp
