#pragma once
// `trainproof sweep --sweep.mode=pairwise` (docs/sweep.md, "Pairwise"): the tournament over every
// rail, the judgement of its matrices, and the second pass that re-measures each flagged node
// against the best node of its rail.
#include "app/stages/sweep_config.h"
#include "app/stages/sweep_report.h"
#include "mpi/collective.h"
#include "mpi/world.h"

namespace tp {

// Collective; the record is complete on rank 0. Each node's first rank reads its InfiniBand error
// counters under `sysfs_root` before and after the pass; each rank names its NIC from it
// (fabric/rank_nic.h), nearest to `gpu_numa_node` where it drives a GPU (-1: by its CPUs).
PairwiseRecord run_pairwise(const SweepConfig& config, const World& world, Collective& collective,
                            const std::string& sysfs_root, int gpu_numa_node);

}  // namespace tp
