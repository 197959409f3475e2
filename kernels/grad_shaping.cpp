#include "kernels/grad_shaping.h"

namespace tp {

// The per-sample shaping pass runs once per sample and layer, next to a GEMM only 2*seq times its
// size, so it is vectorised: an AVX2 clone where the CPU has it, SSE2 otherwise. Only exact IEEE
// operations (multiply, compare-select, add) are used, so both clones give identical bits.
// Under ThreadSanitizer there is one clone: g++ instruments the ifunc resolver that picks a clone,
// and the dynamic linker runs it before the TSan runtime is up (google/sanitizers#342).
#ifdef __SANITIZE_THREAD__
#define TP_SHAPING_CLONES
#else
#define TP_SHAPING_CLONES __attribute__((target_clones("avx2", "default")))
#endif
TP_SHAPING_CLONES void shape_and_accumulate(const float* sample_grad, float* accumulator, size_t n,
                                            const GradGrid& grid) {
  for (size_t i = 0; i < n; ++i) accumulator[i] += shape_contribution(sample_grad[i], grid);
}

}  // namespace tp
