#pragma once
#include "app/cli/cli.h"

namespace tp {

// `trainproof drill`: a supervisor, not an MPI rank. It launches `train` through the user's
// launcher, injects the faults, relaunches with --resume auto after each failure, and proves the
// final state bit-identical to a reference run. Returns the process exit code.
int run_drill(const Invocation& invocation);

// The drill's options, read as run_drill reads them before its first launch (UsageError for a
// bad one); what `drill --help` lists is held to it (tests/unit/test_help.cpp).
void read_drill_options(const po::variables_map& values);

}  // namespace tp
