#include "kernels/cpu_backend.h"

#include <cblas.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/errors.h"
#include "common/philox.h"
#include "common/sysinfo.h"
#include "kernels/grad_shaping.h"
#include "kernels/optimizer_math.h"

namespace tp {
namespace {

class SteadyPhaseClock final : public PhaseClock {
 public:
  void mark(Mark m) override { at_[static_cast<int>(m)] = std::chrono::steady_clock::now(); }
  double seconds_between(Mark from, Mark to) override {
    return std::chrono::duration<double>(at_[static_cast<int>(to)] - at_[static_cast<int>(from)])
        .count();
  }

 private:
  std::chrono::steady_clock::time_point at_[static_cast<int>(Mark::kCount)];
};

// Row-major C[m x n] = op(A) * op(B).
void gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, const float* b,
          float* c) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, trans_a ? m : k, b,
              trans_b ? k : n, 0.0f, c, n);
}

class CpuBackend final : public ComputeBackend {
 public:
  std::string name() const override { return "cpu"; }
  std::string device() const override { return "cpu"; }

  uint64_t bytes_needed(const BackendConfig& c) const override {
    const uint64_t layer = uint64_t(c.hidden) * c.hidden;
    const uint64_t states = c.optimizer.kind == OptimizerKind::adam ? 2 : 1;
    const uint64_t tokens = uint64_t(c.local_samples) * c.seq * c.hidden;
    // params + grads + optimizer, activations of every layer boundary, targets and two
    // activation-gradient buffers, and one per-sample weight-gradient scratch.
    return sizeof(float) *
           (layer * c.layers * (2 + states) + tokens * (c.layers + 1) + tokens * 3 + layer);
  }

  std::optional<uint64_t> memory_available() const override {
    return meminfo_bytes("MemAvailable");
  }

  void initialize(const BackendConfig& c) override {
    config_ = c;
    openblas_set_num_threads(1);
    layer_size_ = size_t(c.hidden) * c.hidden;
    sample_size_ = size_t(c.seq) * c.hidden;
    grid_ = make_grad_grid(c.global_batch);
    state_.params.assign(layer_size_ * c.layers, 0.0f);
    grads_.assign(state_.params.size(), 0.0f);
    state_.moment1.assign(state_.params.size(), 0.0f);
    state_.moment2.assign(c.optimizer.kind == OptimizerKind::adam ? state_.params.size() : 0, 0.0f);
    activations_.assign(sample_size_ * c.local_samples * (c.layers + 1), 0.0f);
    targets_.assign(sample_size_ * c.local_samples, 0.0f);
    upstream_.assign(sample_size_ * c.local_samples, 0.0f);
    downstream_.assign(upstream_.size(), 0.0f);
    sample_weight_grad_.assign(layer_size_, 0.0f);
    // Scale 1/sqrt(hidden) keeps activations O(1) through a deep stack of linear layers.
    const float scale = 1.0f / std::sqrt(float(c.hidden));
    for (int l = 0; l < c.layers; ++l)
      philox::fill_uniform(layer_params(l), layer_size_, c.seed, philox::kParams, uint64_t(l),
                           scale);
  }

  void load_batch(const BatchView& batch) override {
    const size_t n = sample_size_ * batch.samples;
    std::memcpy(activation(0, 0), batch.inputs, n * sizeof(float));
    std::memcpy(targets_.data(), batch.targets, n * sizeof(float));
  }

  void forward() override {
    const int h = config_.hidden, seq = config_.seq;
    for (int l = 0; l < config_.layers; ++l)
      for (int s = 0; s < config_.local_samples; ++s) {
        gemm(false, false, seq, h, h, activation(l, s), layer_params(l), activation(l + 1, s));
        progress();
      }
    // Loss 0.5*|y - target|^2 / seq per sample: the output gradient is (y - target) / seq.
    const float inv_seq = 1.0f / float(seq);
    const float* out = activation(config_.layers, 0);
    for (size_t i = 0; i < upstream_.size(); ++i) upstream_[i] = (out[i] - targets_[i]) * inv_seq;
  }

  void backward_layer(int layer) override {
    const int h = config_.hidden, seq = config_.seq;
    float* grad = grads_.data() + layer_size_ * layer;
    std::fill(grad, grad + layer_size_, 0.0f);
    for (int s = 0; s < config_.local_samples; ++s) {
      float* dy = upstream_.data() + sample_size_ * s;
      // Per-sample weight gradient, shaped before it meets any other sample: this is what makes
      // the sum independent of how samples are split over ranks.
      gemm(true, false, h, h, seq, activation(layer, s), dy, sample_weight_grad_.data());
      shape_and_accumulate(sample_weight_grad_.data(), grad, layer_size_, grid_);
      progress();
      if (layer > 0) {
        gemm(false, true, seq, h, h, dy, layer_params(layer),
             downstream_.data() + sample_size_ * s);
        progress();
      }
    }
    upstream_.swap(downstream_);
  }

  void set_progress_hook(std::function<void()> hook) override { progress_ = std::move(hook); }
  void synchronize() override {}
  float* gradients() override { return grads_.data(); }
  void write_gradients(const float* host, size_t n) override {
    std::memcpy(grads_.data(), host, n * sizeof(float));
  }
  void read_gradients(float* host, size_t n) override {
    std::memcpy(host, grads_.data(), n * sizeof(float));
  }

  void optimizer_step(int64_t step) override {
    const OptimizerConfig& o = config_.optimizer;
    const size_t n = state_.params.size();
    float* w = state_.params.data();
    const float* g = grads_.data();
    float* m = state_.moment1.data();
    if (o.kind == OptimizerKind::sgd_momentum) {
      for (size_t i = 0; i < n; ++i) sgd_momentum_update(w[i], m[i], g[i], o.lr, o.momentum);
      return;
    }
    float* v = state_.moment2.data();
    const AdamCorrections c = adam_corrections(o, step);
    for (size_t i = 0; i < n; ++i)
      adam_update(w[i], m[i], v[i], g[i], o.lr, o.beta1, o.beta2, c.first, c.second, o.eps);
  }

  void export_state(TrainingState& state) override {
    state.params = state_.params;
    state.moment1 = state_.moment1;
    state.moment2 = state_.moment2;
  }
  const TrainingState* host_resident_state(int64_t step) override {
    state_.step = step;
    return &state_;
  }
  void import_state(const TrainingState& state) override {
    if (state.params.size() != state_.params.size() ||
        state.moment1.size() != state_.moment1.size() ||
        state.moment2.size() != state_.moment2.size())
      throw RuntimeError("restored state does not match the model's size");
    state_.params = state.params;
    state_.moment1 = state.moment1;
    state_.moment2 = state.moment2;
  }

  Digest128 state_digest() override {
    DigestBuilder digest;
    digest.add_all(state_.params);
    digest.add_all(state_.moment1);
    digest.add_all(state_.moment2);
    return digest.finish();
  }

  void perturb_state_for_test() override {
    uint32_t bits;
    std::memcpy(&bits, &state_.params[0], sizeof bits);
    bits ^= 1u;
    std::memcpy(&state_.params[0], &bits, sizeof bits);
  }

  std::unique_ptr<PhaseClock> make_phase_clock() override {
    return std::make_unique<SteadyPhaseClock>();
  }

  double measure_gemm_rate(double min_seconds) override {
    const int h = config_.hidden, seq = config_.seq;
    std::vector<float> a(sample_size_, 0.5f), c(sample_size_);
    const double flops = 2.0 * seq * h * double(h);
    gemm(false, false, seq, h, h, a.data(), layer_params(0), c.data());  // warm caches
    const auto start = std::chrono::steady_clock::now();
    int64_t runs = 0;
    double elapsed = 0.0;
    do {
      gemm(false, false, seq, h, h, a.data(), layer_params(0), c.data());
      ++runs;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    } while (elapsed < min_seconds);
    return flops * double(runs) / elapsed;
  }

 private:
  float* layer_params(int l) { return state_.params.data() + layer_size_ * l; }
  float* activation(int boundary, int sample) {
    return activations_.data() + sample_size_ * (size_t(config_.local_samples) * boundary + sample);
  }
  void progress() {
    if (progress_) progress_();
  }

  BackendConfig config_;
  size_t layer_size_ = 0, sample_size_ = 0;
  GradGrid grid_{};
  TrainingState state_;  // parameters and optimizer moments; its step is set when exported
  std::vector<float> grads_;
  std::vector<float> activations_, targets_, upstream_, downstream_, sample_weight_grad_;
  std::function<void()> progress_;
};

}  // namespace

std::unique_ptr<ComputeBackend> make_cpu_backend() {
  return std::make_unique<CpuBackend>();
}

std::string openblas_version() {
  const char* config = openblas_get_config();
  return config ? config : "unknown";
}

}  // namespace tp
