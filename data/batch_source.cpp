#include "data/batch_source.h"

#include "common/philox.h"

namespace tp {

SyntheticBatchSource::SyntheticBatchSource(const ModelSpec& model, BatchShare share, uint64_t seed)
    : model_(model), share_(share), seed_(seed) {}

void SyntheticBatchSource::next(int64_t step, Batch& batch) {
  const size_t per_sample = size_t(model_.seq) * model_.hidden;
  batch.samples = share_.samples;
  batch.first_global_sample = global_sample_index(step, model_.global_batch, share_.first, 0);
  batch.inputs.resize(per_sample * share_.samples);
  batch.targets.resize(per_sample * share_.samples);
  for (int i = 0; i < share_.samples; ++i) {
    const uint64_t sample = uint64_t(batch.first_global_sample + i);
    philox::fill_uniform(batch.inputs.data() + per_sample * i, per_sample, seed_, philox::kInputs,
                         sample, 1.0f);
    philox::fill_uniform(batch.targets.data() + per_sample * i, per_sample, seed_, philox::kTargets,
                         sample, 1.0f);
  }
}

}  // namespace tp
