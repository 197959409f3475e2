#pragma once
#include "app/cli/cli.h"

namespace tp {

// `trainproof accept`: one MPI rank of an acceptance run (docs/acceptance.md). Returns the
// process exit code.
int run_accept(const Invocation& invocation);

}  // namespace tp
