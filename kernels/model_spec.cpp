#include "kernels/model_spec.h"

#include <cmath>

namespace tp {

int hidden_for_parameters(int64_t params, int layers) {
  int64_t hidden = static_cast<int64_t>(std::sqrt(double(params) / double(layers)));
  while (hidden > 1 && layers * hidden * hidden > params) --hidden;
  while (layers * (hidden + 1) * (hidden + 1) <= params) ++hidden;
  return static_cast<int>(hidden);
}

BatchShare batch_share(int64_t global_batch, int world_size, int rank) {
  const int64_t begin = global_batch * rank / world_size;
  const int64_t end = global_batch * (rank + 1) / world_size;
  return {begin, static_cast<int>(end - begin)};
}

}  // namespace tp
