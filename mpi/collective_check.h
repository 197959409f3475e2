#pragma once
// Correctness of the collective itself: a reduction whose exact result is known in advance, run
// through the same Collective (blocking and non-blocking paths) the step loop uses.
#include <cstddef>
#include <cstdint>

#include "mpi/collective.h"
#include "mpi/world.h"

namespace tp {

struct CollectiveCheck {
  int64_t wrong_elements = 0;  // summed over all ranks and both paths
  int64_t checked_elements = 0;
  int first_wrong_rank = -1;  // lowest rank that saw a wrong value, or -1
};

// Rank r contributes 1 + (i + r) % 3 at element i: small integers, so the fp32 sum is exact and
// equals the closed form on every rank. `corrupt_rank` (test only) falsifies one result.
CollectiveCheck check_allreduce(Collective& collective, const World& world, size_t count,
                                int corrupt_rank);

}  // namespace tp
