#include "kernels/grad_shaping.h"

namespace tp {

// The per-sample shaping pass runs once per sample and layer, next to a GEMM only 2*seq times its
// size, so it is vectorised: an AVX2 clone where the CPU has it, SSE2 otherwise. Only exact IEEE
// operations (multiply, compare-select, add) are used, so both clones give identical bits.
__attribute__((target_clones("avx2", "default"))) void shape_and_accumulate(
    const float* sample_grad, float* accumulator, size_t n, const GradGrid& grid) {
  for (size_t i = 0; i < n; ++i) accumulator[i] += shape_contribution(sample_grad[i], grid);
}

}  // namespace tp
