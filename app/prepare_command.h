#pragma once
#include "app/cli/cli.h"

namespace tp {

// `trainproof prepare-data`: every rank writes its share of the dataset's shards; rank 0 writes
// index.json last. Returns the process exit code.
int run_prepare_data(const Invocation& invocation);

}  // namespace tp
