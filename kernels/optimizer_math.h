#pragma once
// One element of each optimizer update, shared by the CPU loop and the CUDA kernel so both apply
// the same IEEE operations in the same order (kernels are built without FMA contraction).
#include <cmath>

#include "common/host_device.h"
#include "kernels/compute_backend.h"

namespace tp {

TP_HD inline void sgd_momentum_update(float& w, float& m, float g, float lr, float momentum) {
  m = momentum * m + g;
  w -= lr * m;
}

struct AdamCorrections {
  float first, second;  // 1 - beta1^step, 1 - beta2^step
};
inline AdamCorrections adam_corrections(const OptimizerConfig& o, int64_t step) {
  return {1.0f - std::pow(o.beta1, float(step)), 1.0f - std::pow(o.beta2, float(step))};
}

// correction1/2 from adam_corrections, computed once per step on the host.
TP_HD inline void adam_update(float& w, float& m, float& v, float g, float lr, float beta1,
                              float beta2, float correction1, float correction2, float eps) {
  m = beta1 * m + (1.0f - beta1) * g;
  v = beta2 * v + (1.0f - beta2) * g * g;
  w -= lr * (m / correction1) / (sqrtf(v / correction2) + eps);
}

}  // namespace tp
