#pragma once
// The synthetic model: `layers` square linear layers of width `hidden` over samples of `seq`
// tokens. Every GEMM shape and FLOP count used in the report is derived here.
#include <cstdint>

namespace tp {

struct ModelSpec {
  int layers = 0;
  int hidden = 0;
  int seq = 0;
  int64_t global_batch = 0;

  int64_t parameters() const { return int64_t(layers) * hidden * hidden; }
  // Per sample: forward x*W in every layer, weight gradient x^T*dy in every layer, and input
  // gradient dy*W^T in every layer but the first (nothing consumes it). Each GEMM is 2*seq*h*h.
  double flops_per_sample() const {
    const double gemm = 2.0 * seq * double(hidden) * hidden;
    return gemm * (layers + layers + (layers - 1));
  }
  double flops_per_step() const { return flops_per_sample() * double(global_batch); }
  int64_t tokens_per_step() const { return global_batch * seq; }
};

// Width for an explicit parameter budget: the largest hidden with layers*hidden^2 <= params.
int hidden_for_parameters(int64_t params, int layers);

// A rank's contiguous slice of the global batch. Shares differ by at most one sample.
struct BatchShare {
  int64_t first = 0;  // offset of the first local sample within the global batch
  int samples = 0;
};
BatchShare batch_share(int64_t global_batch, int world_size, int rank);

}  // namespace tp
