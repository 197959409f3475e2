// GPU unit tests: the CUDA kernels against the CPU definitions, and the CUDA backend's
// determinism. Exit code 77 (ctest: skipped, with the reason printed) where no GPU is usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "data/batch_source.h"
#include "kernels/cpu_backend.h"
#include "kernels/cuda_backend.h"
#include "kernels/grad_shaping.h"
#include "kernels/optimizer_math.h"

namespace {

constexpr int kLayers = 3, kHidden = 64, kSeq = 16, kBatch = 6;

struct Shape {
  int hidden = kHidden, seq = kSeq;
};

tp::BackendConfig config(int local_samples, Shape shape = {}) {
  tp::BackendConfig c{kLayers, shape.hidden, shape.seq, kBatch, local_samples, 42, {}};
  c.optimizer.kind = tp::OptimizerKind::adam;
  c.optimizer.lr = 1e-3f;
  return c;
}

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// One step's reduced-to-be gradients of `samples` samples starting at `first`, on any backend.
std::vector<float> step_gradients(tp::ComputeBackend& backend, int first, int samples,
                                  Shape shape = {}) {
  backend.initialize(config(samples, shape));
  tp::SyntheticBatchSource source({kLayers, shape.hidden, shape.seq, kBatch}, {first, samples}, 42);
  tp::Batch batch;
  source.next(1, batch);
  backend.load_batch(batch.view());
  backend.forward();
  for (int l = kLayers - 1; l >= 0; --l) backend.backward_layer(l);
  backend.synchronize();
  std::vector<float> grads(size_t(kLayers) * shape.hidden * shape.hidden);
  backend.read_gradients(grads.data(), grads.size());
  return grads;
}

TEST(GpuKernels, InitMatchesCpuBitForBit) {
  auto gpu = tp::make_cuda_backend(0, "fp32");
  auto cpu = tp::make_cpu_backend();
  gpu->initialize(config(2));
  cpu->initialize(config(2));
  EXPECT_EQ(gpu->state_digest().hex(), cpu->state_digest().hex());
}

TEST(GpuKernels, ShapingMatchesCpuBitForBit) {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> heavy(0.0f, 30.0f);
  const auto grid = tp::make_grad_grid(24);
  std::vector<float> grads(100003), cpu(grads.size()), gpu(grads.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    grads[i] = heavy(rng);
    cpu[i] = gpu[i] = float(int(i % 9) - 4) * grid.quantum;
  }
  grads[7] = std::nanf("");
  tp::shape_and_accumulate(grads.data(), cpu.data(), grads.size(), grid);
  tp::cuda_test::shape_and_accumulate(grads.data(), gpu.data(), grads.size(), grid);
  for (size_t i = 0; i < grads.size(); ++i) ASSERT_EQ(bits(gpu[i]), bits(cpu[i])) << i;
}

TEST(GpuKernels, OptimizersMatchCpuBitForBit) {
  std::mt19937_64 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const size_t n = 50001;
  for (auto kind : {tp::OptimizerKind::sgd_momentum, tp::OptimizerKind::adam}) {
    tp::OptimizerConfig o;
    o.kind = kind;
    std::vector<float> w(n), m(n), v(n), g(n);
    for (size_t i = 0; i < n; ++i) {
      w[i] = normal(rng);
      m[i] = 0.1f * normal(rng);
      v[i] = std::fabs(0.01f * normal(rng));
      g[i] = normal(rng);
    }
    auto cw = w, cm = m, cv = v;
    const tp::AdamCorrections c = tp::adam_corrections(o, 7);
    for (size_t i = 0; i < n; ++i) {
      if (kind == tp::OptimizerKind::sgd_momentum)
        tp::sgd_momentum_update(cw[i], cm[i], g[i], o.lr, o.momentum);
      else
        tp::adam_update(cw[i], cm[i], cv[i], g[i], o.lr, o.beta1, o.beta2, c.first, c.second,
                        o.eps);
    }
    tp::cuda_test::optimizer(o, 7, w.data(), m.data(), v.data(), g.data(), n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(bits(w[i]), bits(cw[i])) << i;
      ASSERT_EQ(bits(m[i]), bits(cm[i])) << i;
      ASSERT_EQ(bits(v[i]), bits(cv[i])) << i;
    }
  }
}

// cuBLAS and OpenBLAS sum in different orders: close, not equal.
TEST(GpuKernels, GradientsAgreeWithCpuWithinRounding) {
  auto gpu = tp::make_cuda_backend(0, "fp32");
  auto cpu = tp::make_cpu_backend();
  const auto g = step_gradients(*gpu, 0, kBatch);
  const auto c = step_gradients(*cpu, 0, kBatch);
  double worst = 0, scale = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    worst = std::max(worst, double(std::fabs(g[i] - c[i])));
    scale = std::max(scale, double(std::fabs(c[i])));
  }
  EXPECT_GT(scale, 0.0);
  EXPECT_LE(worst, 4 * tp::make_grad_grid(kBatch).quantum + 1e-4 * scale);
}

// The GPU's own world-size independence: per-sample GEMMs of one shape and alignment, shaped
// sums. The odd shape (100 x 10 elements per sample) needs the padded per-sample stride.
TEST(GpuBackend, GradientSumDoesNotDependOnPartition) {
  for (Shape shape : {Shape{}, Shape{100, 10}})
    for (const char* dtype : {"fp32", "bf16", "fp16"}) {
      auto whole_backend = tp::make_cuda_backend(0, dtype);
      const auto whole = step_gradients(*whole_backend, 0, kBatch, shape);
      std::vector<float> total(whole.size(), 0.0f);
      int first = 0;
      for (int n : {1, 2, 3}) {
        auto part_backend = tp::make_cuda_backend(0, dtype);
        const auto part = step_gradients(*part_backend, first, n, shape);
        for (size_t i = 0; i < total.size(); ++i) total[i] += part[i];
        first += n;
      }
      ASSERT_EQ(total, whole) << dtype << " hidden " << shape.hidden;
    }
}

// 16-bit inputs round activations, so they only approximate the fp32 CPU gradients; a wrong GEMM
// mapping or type combination would be far off.
TEST(GpuBackend, SixteenBitGradientsApproximateCpu) {
  auto cpu = tp::make_cpu_backend();
  const auto c = step_gradients(*cpu, 0, kBatch);
  for (const char* dtype : {"bf16", "fp16"}) {
    auto gpu = tp::make_cuda_backend(0, dtype);
    const auto g = step_gradients(*gpu, 0, kBatch);
    double error = 0, norm = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      error += (g[i] - c[i]) * double(g[i] - c[i]);
      norm += double(c[i]) * c[i];
    }
    EXPECT_GT(norm, 0.0);
    EXPECT_LT(std::sqrt(error / norm), 0.05) << dtype;
  }
}

TEST(GpuBackend, TrainingIsDeterministicAndStateMoves) {
  for (const char* dtype : {"fp32", "bf16"}) {
    std::string digests[2];
    for (auto& digest : digests) {
      auto backend = tp::make_cuda_backend(0, dtype);
      step_gradients(*backend, 0, kBatch);
      backend->optimizer_step(1);
      digest = backend->state_digest().hex();
    }
    EXPECT_EQ(digests[0], digests[1]) << dtype;
    auto fresh = tp::make_cuda_backend(0, dtype);
    fresh->initialize(config(kBatch));
    EXPECT_NE(fresh->state_digest().hex(), digests[0]) << dtype;
  }
}

TEST(GpuBackend, GemmRateIsMeasured) {
  auto backend = tp::make_cuda_backend(0, "bf16");
  backend->initialize(config(1));
  EXPECT_GT(backend->measure_gemm_rate(0.05), 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no usable CUDA device (%s)\n",
                status != cudaSuccess ? cudaGetErrorString(status) : "none visible");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
