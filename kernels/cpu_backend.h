#pragma once
#include "kernels/compute_backend.h"

namespace tp {

// OpenBLAS GEMMs on one thread per rank, so results do not depend on a thread split.
std::unique_ptr<ComputeBackend> make_cpu_backend();
std::string openblas_version();

}  // namespace tp
