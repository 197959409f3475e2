#pragma once
// The topology preflight of a run (fabric/topology_preflight.h) with what only the application
// knows added to each node: the MPI library, the GPU library's versions, the driver, the GPUs and
// `nvidia-smi topo -m`, read on every node, not only on rank 0.
#include "app/stages/backend_selection.h"
#include "fabric/topology_preflight.h"
#include "train/train_config.h"

namespace tp {

// Collective; complete on rank 0. With config.preflight_topology off, every node is listed with
// its host alone and nothing is judged.
TopologyPreflight run_topology_preflight(const TrainConfig& config, const World& world,
                                         const Backends& backends);

}  // namespace tp
