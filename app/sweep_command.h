#pragma once
#include "app/cli/cli.h"

namespace tp {

// `trainproof sweep`: one MPI rank of a collective sweep or a pairwise pass (docs/sweep.md).
// Returns the process exit code.
int run_sweep_command(const Invocation& invocation);

}  // namespace tp
