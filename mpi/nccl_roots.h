#pragma once
// Which ranks create the ncclUniqueIds a communicator is built from (docs/architecture.md,
// "Communicator set-up"). With one root, NCCL's bootstrap funnels every rank through rank 0 and
// staggers its connections above 256 ranks; ncclCommInitRankScalable (NCCL 2.23) takes several
// ids, each served by its own root, so the set-up no longer waits on one process. The ranks are
// split into contiguous blocks as even as they can be (the first `size % roots` blocks one rank
// larger), as NCCL's bootstrap assigns them, and each block's first rank is its root.
#include <memory>
#include <string>
#include <vector>

#include "mpi/comm_abort.h"

namespace tp {

// The first NCCL release with ncclCommInitRankScalable, as ncclGetVersion encodes it.
inline constexpr int kNcclScalableInitVersion = 22300;
// comm.ranks_per_root's default: one root per 128 ranks, as PyTorch does.
inline constexpr int kDefaultRanksPerRoot = 128;

struct NcclRootPlan {
  std::vector<int> roots;  // ranks that create an id, ascending; roots[i] creates id i
  bool scalable = false;   // ncclCommInitRankScalable; false: ncclCommInitRankConfig, one id
  std::string note;        // for the report: how the communicator is set up, and why
};

// What the NCCL communicators are built with (comm.ranks_per_root, watchdog.abort_grace_s), and
// the registry their aborts join.
struct NcclOptions {
  int ranks_per_root = kDefaultRanksPerRoot;
  double abort_grace_s = kDefaultAbortGraceS;
  std::shared_ptr<CommAborts> aborts;
};

// The plan for `size` ranks at `ranks_per_root` (>= 1) under the NCCL whose ncclGetVersion code
// is `nccl_version` (0: unknown). An older NCCL, or a job that needs one root anyway, gets one.
NcclRootPlan plan_nccl_roots(int size, int ranks_per_root, int nccl_version);

// The index of the id `rank` creates under `plan`, or -1 when it creates none.
int root_index_of(const NcclRootPlan& plan, int rank);

}  // namespace tp
