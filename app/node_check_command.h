#pragma once
// `trainproof node-check`: one machine against its host type's inventory, without MPI
// (docs/node-check.md).
#include "app/cli/cli.h"

namespace tp {

int run_node_check(const Invocation& inv);

}  // namespace tp
