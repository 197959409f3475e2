#pragma once
// Correctness of the collective itself: a reduction whose exact result is known in advance, run
// through the same Collective (blocking and non-blocking paths) the step loop uses.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "mpi/collective.h"
#include "mpi/world.h"

namespace tp {

struct CollectiveCheck {
  int64_t wrong_elements = 0;  // summed over all ranks and both paths
  int64_t checked_elements = 0;
  int first_wrong_rank = -1;  // lowest rank that saw a wrong value, or -1
};

// A buffer in the memory the collective reduces (host, or a GPU's), with copies to and from it.
struct ReductionBuffer {
  float* data = nullptr;
  size_t count = 0;
  std::function<void(const std::vector<float>&)> write;
  std::function<void(std::vector<float>&)> read;
};

// Rank r contributes 1 + (i + r) % 3 at element i: small integers, so the fp32 sum is exact and
// equals the closed form on every rank. `corrupt_rank` (test only) falsifies one result.
CollectiveCheck check_allreduce(Collective& collective, const World& world,
                                const ReductionBuffer& buffer, int corrupt_rank);

}  // namespace tp
