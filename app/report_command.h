#pragma once
#include "app/cli/cli.h"

namespace tp {

// `trainproof report FILE`, `report compare` and `report merge`: reprint, compare or join
// reports; the exit code follows the verdict.
int run_report(const Invocation& invocation);

}  // namespace tp
