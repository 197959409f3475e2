#pragma once
#include "app/cli/cli.h"

namespace tp {

// `trainproof drill`: a supervisor, not an MPI rank. It launches `train` through the user's
// launcher, injects the faults, relaunches with --resume auto after each failure, and proves the
// final state bit-identical to a reference run. Returns the process exit code.
int run_drill(const Invocation& invocation);

}  // namespace tp
