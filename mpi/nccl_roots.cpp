#include "mpi/nccl_roots.h"

#include <algorithm>

#include "common/errors.h"

namespace tp {
namespace {

std::string version_text(int code) {
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
         std::to_string(code % 100);
}

}  // namespace

NcclRootPlan plan_nccl_roots(int size, int ranks_per_root, int nccl_version) {
  if (size < 1) throw UsageError("a communicator needs at least one rank");
  if (ranks_per_root < 1)
    throw UsageError("comm.ranks_per_root=" + std::to_string(ranks_per_root) +
                     ": must be at least 1");
  NcclRootPlan plan;
  const int wanted = (size + ranks_per_root - 1) / ranks_per_root;
  const bool too_old = nccl_version > 0 && nccl_version < kNcclScalableInitVersion;
  if (too_old || nccl_version <= 0) {
    plan.roots = {0};
    plan.note = "NCCL set-up from one root (ncclCommInitRankConfig): " +
                (nccl_version <= 0 ? std::string("the NCCL version is unknown")
                                   : "NCCL " + version_text(nccl_version) +
                                         " predates ncclCommInitRankScalable (2.23)") +
                (wanted > 1 ? "; " + std::to_string(wanted) + " roots were wanted at " +
                                  std::to_string(ranks_per_root) + " ranks per root"
                            : std::string());
    return plan;
  }
  // Blocks as even as they can be: the first `larger` blocks hold one rank more.
  const int base = size / wanted, larger = size % wanted;
  for (int i = 0, first = 0; i < wanted; ++i) {
    plan.roots.push_back(first);
    first += base + (i < larger ? 1 : 0);
  }
  plan.scalable = true;
  plan.note = "NCCL set-up from " + std::to_string(wanted) + (wanted == 1 ? " root" : " roots") +
              " (ncclCommInitRankScalable, comm.ranks_per_root=" + std::to_string(ranks_per_root) +
              ")";
  return plan;
}

int root_index_of(const NcclRootPlan& plan, int rank) {
  const auto it = std::lower_bound(plan.roots.begin(), plan.roots.end(), rank);
  return it != plan.roots.end() && *it == rank ? int(it - plan.roots.begin()) : -1;
}

}  // namespace tp
