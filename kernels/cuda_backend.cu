// The CUDA compute backend: cuBLAS GEMMs per sample (fp32, or bf16/fp16 inputs with fp32
// accumulation) and the project's kernels for init, loss gradient, gradient shaping and the
// optimizer. Built without FMA contraction (--fmad=false) so the elementwise passes give the CPU
// backend's bits; GEMMs differ from OpenBLAS in summation order, hence in their last bits.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "common/cuda_check.h"
#include "common/philox.h"
#include "kernels/cuda_backend.h"
#include "kernels/cuda_resources.h"
#include "kernels/grad_shaping.h"
#include "kernels/optimizer_math.h"

namespace tp {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(size_t n) {
  const size_t blocks = n == 0 ? 1 : (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535u * 64u ? blocks : 65535u * 64u);
}

template <typename T>
struct Element;
template <>
struct Element<float> {
  static constexpr cudaDataType_t kType = CUDA_R_32F;
  __device__ static float to_float(float v) { return v; }
  __device__ static float from_float(float v) { return v; }
};
template <>
struct Element<__nv_bfloat16> {
  static constexpr cudaDataType_t kType = CUDA_R_16BF;
  __device__ static float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }
};
template <>
struct Element<__half> {
  static constexpr cudaDataType_t kType = CUDA_R_16F;
  __device__ static float to_float(__half v) { return __half2float(v); }
  __device__ static __half from_float(float v) { return __float2half_rn(v); }
};

#define GRID_STRIDE_LOOP(i, n)                                            \
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < (n); \
       i += size_t(blockDim.x) * gridDim.x)

// One thread per 4-element Philox block: the same draw as philox::fill_uniform on the CPU.
__global__ void init_uniform_kernel(float* out, uint64_t n, uint64_t seed, uint64_t item,
                                    float scale) {
  GRID_STRIDE_LOOP(block, (n + 3) / 4) {
    const philox::Counter bits = philox::block_bits(seed, philox::kParams, item, block);
    for (int lane = 0; lane < 4 && block * 4 + lane < n; ++lane)
      out[block * 4 + lane] = philox::to_symmetric_unit(bits[lane]) * scale;
  }
}

template <typename T>
__global__ void cast_kernel(const float* in, T* out, size_t n) {
  GRID_STRIDE_LOOP(i, n) out[i] = Element<T>::from_float(in[i]);
}

// Contiguous host-layout samples into the padded per-sample stride of device buffers.
template <typename T>
__global__ void cast_to_stride_kernel(const float* in, T* out, size_t sample, size_t stride,
                                      size_t samples) {
  GRID_STRIDE_LOOP(i, sample * samples) {
    out[(i / sample) * stride + i % sample] = Element<T>::from_float(in[i]);
  }
}

template <typename T>
__global__ void loss_gradient_kernel(const T* output, const T* target, T* upstream, size_t n,
                                     float inv_seq) {
  GRID_STRIDE_LOOP(i, n) {
    const float diff = Element<T>::to_float(output[i]) - Element<T>::to_float(target[i]);
    upstream[i] = Element<T>::from_float(diff * inv_seq);
  }
}

__global__ void shape_accumulate_kernel(const float* sample_grad, float* accumulator, size_t n,
                                        GradGrid grid) {
  GRID_STRIDE_LOOP(i, n) accumulator[i] += shape_contribution(sample_grad[i], grid);
}

__global__ void sgd_kernel(float* w, float* m, const float* g, size_t n, float lr, float momentum) {
  GRID_STRIDE_LOOP(i, n) sgd_momentum_update(w[i], m[i], g[i], lr, momentum);
}

__global__ void adam_kernel(float* w, float* m, float* v, const float* g, size_t n, float lr,
                            float beta1, float beta2, float c1, float c2, float eps) {
  GRID_STRIDE_LOOP(i, n) adam_update(w[i], m[i], v[i], g[i], lr, beta1, beta2, c1, c2, eps);
}

void launch_optimizer(const OptimizerConfig& o, int64_t step, float* w, float* m, float* v,
                      const float* g, size_t n, cudaStream_t stream) {
  if (o.kind == OptimizerKind::sgd_momentum) {
    sgd_kernel<<<blocks_for(n), kThreads, 0, stream>>>(w, m, g, n, o.lr, o.momentum);
  } else {
    const AdamCorrections c = adam_corrections(o, step);
    adam_kernel<<<blocks_for(n), kThreads, 0, stream>>>(w, m, v, g, n, o.lr, o.beta1, o.beta2,
                                                        c.first, c.second, o.eps);
  }
  cudaCheck(cudaGetLastError());
}

template <typename T>
class CudaBackend final : public CudaBackendBase {
 public:
  CudaBackend(int device, std::string dtype) : device_(device), dtype_(std::move(dtype)) {
    cudaCheck(cudaSetDevice(device_));
    cudaCheck(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    cublasCheck(cublasCreate(&cublas_));
    cublasCheck(cublasSetStream(cublas_, stream_));
    // fp32 GEMMs must not silently drop to TF32 (pedantic); 16-bit GEMMs keep their tensor cores
    // but must accumulate in full fp32.
    cublasCheck(cublasSetMathMode(
        cublas_, std::is_same_v<T, float>
                     ? CUBLAS_PEDANTIC_MATH
                     : cublasMath_t(CUBLAS_DEFAULT_MATH |
                                    CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
    cudaDeviceProp prop{};
    cudaCheck(cudaGetDeviceProperties(&prop, device_));
    device_name_ = prop.name;
    phase_events_ = std::make_unique<EventPhaseClock>(stream_);
    cudaCheck(cudaEventCreateWithFlags(&batch_copied_, cudaEventDisableTiming));
  }
  ~CudaBackend() override {
    cudaStreamSynchronize(stream_);
    phase_events_.reset();
    cudaEventDestroy(batch_copied_);
    cublasDestroy(cublas_);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "cuda"; }
  std::string device() const override {
    return "cuda:" + std::to_string(device_) + " (" + device_name_ + ", " + dtype_ + ")";
  }
  int device_index() const override { return device_; }
  cudaStream_t stream() const override { return stream_; }
  size_t gradient_count() const override { return grads_.size(); }

  uint64_t bytes_needed(const BackendConfig& c) const override {
    const uint64_t layer = uint64_t(c.hidden) * c.hidden;
    const uint64_t states = c.optimizer.kind == OptimizerKind::adam ? 2 : 1;
    const uint64_t sample = uint64_t(c.seq) * c.hidden;
    const uint64_t tokens = uint64_t(c.local_samples) * padded_stride(sample);
    const uint64_t weight_copy = sizeof(T) == sizeof(float) ? 0 : sizeof(T) * layer * c.layers;
    return sizeof(float) *
               (layer * c.layers * (2 + states) + layer + 2 * sample * uint64_t(c.local_samples)) +
           weight_copy + sizeof(T) * tokens * (c.layers + 1 + 3);
  }
  std::optional<uint64_t> memory_available() const override {
    size_t free_bytes = 0, total = 0;
    if (cudaSetDevice(device_) != cudaSuccess || cudaMemGetInfo(&free_bytes, &total) != cudaSuccess)
      return std::nullopt;
    return free_bytes;
  }

  void initialize(const BackendConfig& c) override {
    config_ = c;
    cudaCheck(cudaSetDevice(device_));
    layer_size_ = size_t(c.hidden) * c.hidden;
    sample_size_ = size_t(c.seq) * c.hidden;
    sample_stride_ = padded_stride(sample_size_);
    const size_t params = layer_size_ * c.layers, tokens = sample_stride_ * c.local_samples;
    grid_ = make_grad_grid(c.global_batch);
    params_.allocate(params);
    grads_.allocate(params);
    moment1_.allocate(params);
    moment2_.allocate(c.optimizer.kind == OptimizerKind::adam ? params : 0);
    if constexpr (!std::is_same_v<T, float>) weights_.allocate(params);
    activations_.allocate(tokens * (c.layers + 1));
    targets_.allocate(tokens);
    upstream_.allocate(tokens);
    downstream_.allocate(tokens);
    sample_weight_grad_.allocate(layer_size_);
    staging_.allocate(2 * sample_size_ * c.local_samples);
    pinned_batch_.allocate(2 * sample_size_ * c.local_samples);
    cudaCheck(cudaMemsetAsync(grads_.get(), 0, params * sizeof(float), stream_));
    cudaCheck(cudaMemsetAsync(moment1_.get(), 0, params * sizeof(float), stream_));
    if (moment2_.size())
      cudaCheck(cudaMemsetAsync(moment2_.get(), 0, params * sizeof(float), stream_));
    // Padding between samples stays zero for the whole run (GEMMs write only the samples), so
    // elementwise passes over whole buffers never meet undefined memory.
    for (DeviceBuffer<T>* b : {&activations_, &targets_, &upstream_, &downstream_})
      cudaCheck(cudaMemsetAsync(b->get(), 0, b->size() * sizeof(T), stream_));
    const float scale = 1.0f / std::sqrt(float(c.hidden));  // as the CPU backend computes it
    for (int l = 0; l < c.layers; ++l) {
      init_uniform_kernel<<<blocks_for((layer_size_ + 3) / 4), kThreads, 0, stream_>>>(
          params_.get() + layer_size_ * l, layer_size_, c.seed, uint64_t(l), scale);
      cudaCheck(cudaGetLastError());
    }
    refresh_weight_copy();
    synchronize();
  }

  void load_batch(const BatchView& batch) override {
    const size_t n = sample_size_ * batch.samples;
    // From pageable memory the copy would be staged and synchronous: the batch goes through a
    // pinned buffer instead, once the previous batch's copy out of it is done.
    cudaCheck(cudaEventSynchronize(batch_copied_));
    std::memcpy(pinned_batch_.get(), batch.inputs, n * sizeof(float));
    std::memcpy(pinned_batch_.get() + n, batch.targets, n * sizeof(float));
    cudaCheck(cudaMemcpyAsync(staging_.get(), pinned_batch_.get(), 2 * n * sizeof(float),
                              cudaMemcpyHostToDevice, stream_));
    cudaCheck(cudaEventRecord(batch_copied_, stream_));
    cast_to_stride_kernel<T><<<blocks_for(n), kThreads, 0, stream_>>>(
        staging_.get(), activations_.get(), sample_size_, sample_stride_, batch.samples);
    cast_to_stride_kernel<T><<<blocks_for(n), kThreads, 0, stream_>>>(
        staging_.get() + n, targets_.get(), sample_size_, sample_stride_, batch.samples);
    cudaCheck(cudaGetLastError());
  }

  void forward() override {
    const int h = config_.hidden, seq = config_.seq;
    for (int l = 0; l < config_.layers; ++l)
      for (int s = 0; s < config_.local_samples; ++s)
        gemm<T>(false, false, seq, h, h, activation(l, s), weights(l), activation(l + 1, s));
    const size_t n = upstream_.size();
    loss_gradient_kernel<T><<<blocks_for(n), kThreads, 0, stream_>>>(
        activation(config_.layers, 0), targets_.get(), upstream_.get(), n, 1.0f / float(seq));
    cudaCheck(cudaGetLastError());
  }

  void backward_layer(int layer) override {
    const int h = config_.hidden, seq = config_.seq;
    float* grad = grads_.get() + layer_size_ * layer;
    cudaCheck(cudaMemsetAsync(grad, 0, layer_size_ * sizeof(float), stream_));
    for (int s = 0; s < config_.local_samples; ++s) {
      const T* dy = upstream_.get() + sample_stride_ * s;
      // Per-sample weight gradient in fp32, shaped before it meets any other sample.
      gemm<float>(true, false, h, h, seq, activation(layer, s), dy, sample_weight_grad_.get());
      shape_accumulate_kernel<<<blocks_for(layer_size_), kThreads, 0, stream_>>>(
          sample_weight_grad_.get(), grad, layer_size_, grid_);
      cudaCheck(cudaGetLastError());
      if (layer > 0)
        gemm<T>(false, true, seq, h, h, dy, weights(layer), downstream_.get() + sample_stride_ * s);
    }
    upstream_.swap(downstream_);
  }

  void set_progress_hook(std::function<void()>) override {}  // NCCL and the GPU progress alone
  void synchronize() override { cudaCheck(cudaStreamSynchronize(stream_)); }
  float* gradients() override { return grads_.get(); }
  void write_gradients(const float* host, size_t n) override {
    cudaCheck(
        cudaMemcpyAsync(grads_.get(), host, n * sizeof(float), cudaMemcpyHostToDevice, stream_));
    synchronize();
  }
  void read_gradients(float* host, size_t n) override {
    synchronize();
    cudaCheck(cudaMemcpy(host, grads_.get(), n * sizeof(float), cudaMemcpyDeviceToHost));
  }

  void optimizer_step(int64_t step) override {
    launch_optimizer(config_.optimizer, step, params_.get(), moment1_.get(), moment2_.get(),
                     grads_.get(), params_.size(), stream_);
    refresh_weight_copy();
  }

  void export_state(TrainingState& state) override {
    synchronize();
    const std::pair<const DeviceBuffer<float>*, std::vector<float>*> parts[] = {
        {&params_, &state.params}, {&moment1_, &state.moment1}, {&moment2_, &state.moment2}};
    for (const auto& [device, host] : parts) {
      host->resize(device->size());
      cudaCheck(cudaMemcpy(host->data(), device->get(), host->size() * sizeof(float),
                           cudaMemcpyDeviceToHost));
    }
  }
  bool pin_host_copy(TrainingState& state) override {
    bool pinned = true;
    for (std::vector<float>* host : {&state.params, &state.moment1, &state.moment2}) {
      if (host->empty()) continue;
      if (cudaHostRegister(host->data(), host->size() * sizeof(float), cudaHostRegisterDefault) !=
          cudaSuccess) {
        (void)cudaGetLastError();  // not sticky: the pageable copy still works
        pinned = false;
      }
    }
    return pinned;
  }
  void unpin_host_copy(TrainingState& state) override {
    for (std::vector<float>* host : {&state.params, &state.moment1, &state.moment2})
      if (!host->empty() && cudaHostUnregister(host->data()) != cudaSuccess)
        (void)cudaGetLastError();  // it was never pinned
  }
  void import_state(const TrainingState& state) override {
    synchronize();
    const std::pair<const DeviceBuffer<float>*, const std::vector<float>*> parts[] = {
        {&params_, &state.params}, {&moment1_, &state.moment1}, {&moment2_, &state.moment2}};
    for (const auto& [device, host] : parts) {
      if (host->size() != device->size())
        throw RuntimeError("restored state has " + std::to_string(host->size()) +
                           " values where the model has " + std::to_string(device->size()));
      // On the compute stream: a copy on the legacy stream is not ordered before the
      // non-blocking stream's kernels that read the state next.
      cudaCheck(cudaMemcpyAsync(device->get(), host->data(), host->size() * sizeof(float),
                                cudaMemcpyHostToDevice, stream_));
    }
    refresh_weight_copy();
    synchronize();
  }

  Digest128 state_digest() override {
    synchronize();
    DigestBuilder digest;
    for (const DeviceBuffer<float>* buffer : {&params_, &moment1_, &moment2_}) {
      std::vector<float> host(buffer->size());
      cudaCheck(cudaMemcpy(host.data(), buffer->get(), host.size() * sizeof(float),
                           cudaMemcpyDeviceToHost));
      digest.add_all(host);
    }
    return digest.finish();
  }

  void perturb_state_for_test() override {
    synchronize();
    uint32_t bits = 0;
    cudaCheck(cudaMemcpy(&bits, params_.get(), sizeof bits, cudaMemcpyDeviceToHost));
    bits ^= 1u;
    cudaCheck(cudaMemcpy(params_.get(), &bits, sizeof bits, cudaMemcpyHostToDevice));
  }

  std::unique_ptr<PhaseClock> make_phase_clock() override {
    return std::make_unique<BorrowedPhaseClock>(*phase_events_);
  }

  double measure_gemm_rate(double min_seconds) override {
    const int h = config_.hidden, seq = config_.seq;
    const double flops = 2.0 * seq * h * double(h);
    cudaEvent_t start, stop;
    cudaCheck(cudaEventCreate(&start));
    cudaCheck(cudaEventCreate(&stop));
    auto run = [&](int count) {
      for (int i = 0; i < count; ++i)
        gemm<T>(false, false, seq, h, h, activation(0, 0), weights(0), activation(1, 0));
    };
    // Defined inputs: uninitialised memory could hold NaNs or denormals that change the speed.
    cudaCheck(cudaMemsetAsync(activation(0, 0), 0, sample_stride_ * sizeof(T), stream_));
    run(3);  // warm-up: cuBLAS heuristics and clocks
    int count = 1;
    float ms = 0;
    for (;;) {
      cudaCheck(cudaEventRecord(start, stream_));
      run(count);
      cudaCheck(cudaEventRecord(stop, stream_));
      cudaCheck(cudaEventSynchronize(stop));
      cudaCheck(cudaEventElapsedTime(&ms, start, stop));
      if (ms * 1e-3 >= min_seconds || count >= (1 << 20)) break;
      count *= 2;
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return flops * count / (ms * 1e-3);
  }

 private:
  // Row-major C[m x n] = op(A) * op(B), as column-major C^T = op(B)^T * op(A)^T. A and B are T;
  // C is `Out` (T for activations, fp32 for weight gradients); accumulation is fp32 throughout.
  template <typename Out>
  void gemm(bool trans_a, bool trans_b, int m, int n, int k, const T* a, const T* b, Out* c) {
    const float alpha = 1.0f, beta = 0.0f;
    const cudaDataType_t out_type = std::is_same_v<Out, float> ? CUDA_R_32F : Element<T>::kType;
    cublasCheck(cublasGemmEx(
        cublas_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
        &alpha, b, Element<T>::kType, trans_b ? k : n, a, Element<T>::kType, trans_a ? m : k, &beta,
        c, out_type, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

  void refresh_weight_copy() {
    if constexpr (!std::is_same_v<T, float>) {
      cast_kernel<T><<<blocks_for(params_.size()), kThreads, 0, stream_>>>(
          params_.get(), weights_.get(), params_.size());
      cudaCheck(cudaGetLastError());
    }
  }
  const T* weights(int l) const {
    if constexpr (std::is_same_v<T, float>)
      return params_.get() + layer_size_ * l;
    else
      return weights_.get() + layer_size_ * l;
  }
  T* activation(int boundary, int sample) {
    return activations_.get() +
           sample_stride_ * (size_t(config_.local_samples) * boundary + sample);
  }

  int device_;
  std::string dtype_, device_name_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  BackendConfig config_;
  // Samples start on 256-byte boundaries: cuBLAS chooses kernels partly by pointer alignment, and
  // every sample must meet the same kernel whatever its position in the local batch.
  static size_t padded_stride(size_t elements) {
    const size_t unit = 256 / sizeof(T);
    return (elements + unit - 1) / unit * unit;
  }
  size_t layer_size_ = 0, sample_size_ = 0, sample_stride_ = 0;
  GradGrid grid_{};
  DeviceBuffer<float> params_, grads_, moment1_, moment2_, sample_weight_grad_, staging_;
  DeviceBuffer<T> weights_, activations_, targets_, upstream_, downstream_;
  PinnedBuffer pinned_batch_;           // inputs then targets, as staging_ holds them
  cudaEvent_t batch_copied_ = nullptr;  // the last batch has left pinned_batch_
  std::unique_ptr<EventPhaseClock> phase_events_;
};

}  // namespace

std::unique_ptr<ComputeBackend> make_cuda_backend(int device, const std::string& dtype) {
  if (dtype == "fp32") return std::make_unique<CudaBackend<float>>(device, dtype);
  if (dtype == "bf16") return std::make_unique<CudaBackend<__nv_bfloat16>>(device, dtype);
  if (dtype == "fp16") return std::make_unique<CudaBackend<__half>>(device, dtype);
  throw UsageError("model.dtype=" + dtype + " is not one of: fp32, bf16, fp16");
}

namespace cuda_test {

void shape_and_accumulate(const float* host_grads, float* host_accumulator, size_t n,
                          const GradGrid& grid) {
  DeviceBuffer<float> grads, accumulator;
  grads.allocate(n);
  accumulator.allocate(n);
  cudaCheck(cudaMemcpy(grads.get(), host_grads, n * sizeof(float), cudaMemcpyHostToDevice));
  cudaCheck(
      cudaMemcpy(accumulator.get(), host_accumulator, n * sizeof(float), cudaMemcpyHostToDevice));
  shape_accumulate_kernel<<<blocks_for(n), kThreads>>>(grads.get(), accumulator.get(), n, grid);
  cudaCheck(cudaGetLastError());
  cudaCheck(
      cudaMemcpy(host_accumulator, accumulator.get(), n * sizeof(float), cudaMemcpyDeviceToHost));
}

void optimizer(const OptimizerConfig& o, int64_t step, float* host_w, float* host_m, float* host_v,
               const float* host_g, size_t n) {
  DeviceBuffer<float> w, m, v, g;
  for (auto* b : {&w, &m, &v, &g}) b->allocate(n);
  const std::pair<DeviceBuffer<float>*, const float*> inputs[] = {
      {&w, host_w}, {&m, host_m}, {&v, host_v}, {&g, host_g}};
  for (const auto& [buffer, host] : inputs)
    cudaCheck(cudaMemcpy(buffer->get(), host, n * sizeof(float), cudaMemcpyHostToDevice));
  launch_optimizer(o, step, w.get(), m.get(), v.get(), g.get(), n, nullptr);
  cudaCheck(cudaMemcpy(host_w, w.get(), n * sizeof(float), cudaMemcpyDeviceToHost));
  cudaCheck(cudaMemcpy(host_m, m.get(), n * sizeof(float), cudaMemcpyDeviceToHost));
  cudaCheck(cudaMemcpy(host_v, v.get(), n * sizeof(float), cudaMemcpyDeviceToHost));
}

}  // namespace cuda_test
}  // namespace tp
