#pragma once
#include "app/cli.h"

namespace tp {

// `trainproof train`: one MPI rank of a data-parallel run. Returns the process exit code.
int run_train(const Invocation& invocation);

// `trainproof report FILE`: reprint a report's summary; exit code follows its verdict.
int run_report(const Invocation& invocation);

}  // namespace tp
