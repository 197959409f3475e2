#pragma once
#include "app/cli/cli.h"

namespace tp {

// `trainproof train`: one MPI rank of a data-parallel run. Returns the process exit code.
int run_train(const Invocation& invocation);

}  // namespace tp
