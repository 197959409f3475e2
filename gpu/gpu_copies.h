#pragma once
// Copy bandwidth on one GPU and between two (docs/node-check.md, "Memory and copies"), with the
// CUDA runtime's copy engines and events only: no kernel of trainproof's own, so the figure is
// the hardware's and the driver's.
#include "gpu/gpu_api.h"

namespace tp {

GpuCopyRates measure_copies(int device, double seconds);
double measure_peer_copy(int source, int destination, double seconds);

}  // namespace tp
