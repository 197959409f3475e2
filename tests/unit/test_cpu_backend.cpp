#include <gtest/gtest.h>

#include <vector>

#include "data/batch_source.h"
#include "kernels/cpu_backend.h"

namespace {

constexpr int kLayers = 3, kHidden = 16, kSeq = 4, kBatch = 6;

tp::BackendConfig config(int local_samples) {
  return {kLayers, kHidden, kSeq, kBatch, local_samples, 42, {}};
}

// Gradient sums of a slice of the global batch for step 1, as one rank would compute them.
std::vector<float> slice_gradients(int first, int samples) {
  auto backend = tp::make_cpu_backend();
  backend->initialize(config(samples));
  tp::SyntheticBatchSource source({kLayers, kHidden, kSeq, kBatch}, {first, samples}, 42);
  tp::Batch batch;
  source.next(1, batch);
  backend->load_batch(batch.view());
  backend->forward();
  for (int l = kLayers - 1; l >= 0; --l) backend->backward_layer(l);
  const float* g = backend->gradients();
  return {g, g + kLayers * kHidden * kHidden};
}

// The whole batch on one rank and the same batch split 2+4 or 1+2+3 give bit-identical sums:
// the foundation of digests that do not depend on the world size.
TEST(CpuBackend, GradientSumDoesNotDependOnPartition) {
  const auto whole = slice_gradients(0, kBatch);
  for (const std::vector<int>& split : {std::vector<int>{2, 4}, std::vector<int>{1, 2, 3}}) {
    std::vector<float> total(whole.size(), 0.0f);
    int first = 0;
    for (int n : split) {
      const auto part = slice_gradients(first, n);
      for (size_t i = 0; i < total.size(); ++i) total[i] += part[i];
      first += n;
    }
    ASSERT_EQ(total, whole);
  }
  bool nonzero = false;
  for (float g : whole) nonzero = nonzero || g != 0.0f;
  EXPECT_TRUE(nonzero) << "gradients are all zero: the test would prove nothing";
}

TEST(CpuBackend, OptimizerChangesStateAndDigest) {
  for (auto kind : {tp::OptimizerKind::sgd_momentum, tp::OptimizerKind::adam}) {
    auto backend = tp::make_cpu_backend();
    auto cfg = config(kBatch);
    cfg.optimizer.kind = kind;
    backend->initialize(cfg);
    const auto initial = backend->state_digest();
    tp::SyntheticBatchSource source({kLayers, kHidden, kSeq, kBatch}, {0, kBatch}, 42);
    tp::Batch batch;
    source.next(1, batch);
    backend->load_batch(batch.view());
    backend->forward();
    for (int l = kLayers - 1; l >= 0; --l) backend->backward_layer(l);
    backend->optimizer_step(1);
    const auto after = backend->state_digest();
    EXPECT_NE(initial, after);
    backend->perturb_state_for_test();
    EXPECT_NE(after, backend->state_digest());
  }
}

TEST(CpuBackend, InitIsDeterministic) {
  auto a = tp::make_cpu_backend(), b = tp::make_cpu_backend();
  a->initialize(config(1));
  b->initialize(config(5));  // the local batch size does not enter the state
  EXPECT_EQ(a->state_digest(), b->state_digest());
  auto c = tp::make_cpu_backend();
  auto other_seed = config(1);
  other_seed.seed = 43;
  c->initialize(other_seed);
  EXPECT_NE(a->state_digest(), c->state_digest());
}

TEST(CpuBackend, MemoryEstimateGrowsWithTheModel) {
  auto backend = tp::make_cpu_backend();
  const auto small = backend->bytes_needed(config(1));
  auto big = config(1);
  big.hidden *= 2;
  EXPECT_GT(backend->bytes_needed(big), 3 * small);
  EXPECT_GE(small, uint64_t(3) * kLayers * kHidden * kHidden * sizeof(float));
}

}  // namespace
