#pragma once
// Where a step's batch comes from. Samples are keyed by their global index (step, position in the
// global batch), never by rank, so the same sample is identical whichever rank reads it. The
// synthetic source draws them from Philox; a storage-backed loader implements the same interface.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/compute_backend.h"
#include "kernels/model_spec.h"

namespace tp {

struct Batch {
  std::vector<float> inputs;   // [samples][seq][hidden]
  std::vector<float> targets;  // same shape
  int samples = 0;
  int64_t first_global_sample = 0;
  BatchView view() const { return {inputs.data(), targets.data(), samples}; }
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual std::string name() const = 0;
  // Fills `batch` with this rank's share of the global batch for `step` (1-based).
  virtual void next(int64_t step, Batch& batch) = 0;
};

class SyntheticBatchSource final : public BatchSource {
 public:
  SyntheticBatchSource(const ModelSpec& model, BatchShare share, uint64_t seed);
  std::string name() const override { return "synthetic"; }
  void next(int64_t step, Batch& batch) override;

  // Global sample index of local sample `i` at `step`: consecutive steps tile the sample space.
  static int64_t global_sample_index(int64_t step, int64_t global_batch, int64_t first, int i) {
    return (step - 1) * global_batch + first + i;
  }

 private:
  ModelSpec model_;
  BatchShare share_;
  uint64_t seed_;
};

}  // namespace tp
