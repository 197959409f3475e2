#pragma once
// The compute backend interface. The step loop drives a backend through these calls only, so a
// CUDA backend (cuBLAS plus the project's kernels) slots in beside the CPU one without touching it.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/digest.h"
#include "common/training_state.h"

namespace tp {

enum class OptimizerKind { sgd_momentum, adam };

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::sgd_momentum;
  float lr = 0.01f;
  float momentum = 0.9f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
};

// What a backend allocates: `layers` square linear layers of width `hidden`, applied to
// `local_samples` samples of `seq` tokens each. `global_batch` fixes the gradient grid.
struct BackendConfig {
  int layers = 0;
  int hidden = 0;
  int seq = 0;
  int64_t global_batch = 0;
  int local_samples = 0;
  uint64_t seed = 0;
  OptimizerConfig optimizer;
};

// One rank's share of a global batch, in host memory: [samples][seq][hidden] inputs and targets.
struct BatchView {
  const float* inputs = nullptr;
  const float* targets = nullptr;
  int samples = 0;
};

// Timestamps of a step's phase boundaries. On CPU these are steady_clock readings; a GPU backend
// records events and resolves them after the step, so the loop never synchronises just to time.
enum class Mark { step_begin, data_ready, compute_end, comm_done, optimizer_end, kCount };

class PhaseClock {
 public:
  virtual ~PhaseClock() = default;
  virtual void mark(Mark m) = 0;
  virtual double seconds_between(Mark from, Mark to) = 0;
};

class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;

  virtual std::string name() const = 0;
  virtual std::string device() const = 0;
  // Bytes this backend allocates per rank for a configuration; used to refuse a model that does
  // not fit before anything is allocated.
  virtual uint64_t bytes_needed(const BackendConfig& config) const = 0;
  // Memory this backend can still allocate from (host RAM, or the device's free memory).
  virtual std::optional<uint64_t> memory_available() const = 0;

  // Allocates and initialises parameters from (seed, layer, element); zeroes optimizer state.
  virtual void initialize(const BackendConfig& config) = 0;
  virtual void load_batch(const BatchView& batch) = 0;
  // Forward through every layer, then the loss gradient at the output.
  virtual void forward() = 0;
  // Backward through one layer for every local sample: the layer's shaped gradient sum is final
  // when this returns (after synchronize() on an asynchronous device).
  virtual void backward_layer(int layer) = 0;
  // Called between GEMMs inside forward/backward, so a communication library without a progress
  // thread can advance outstanding collectives.
  virtual void set_progress_hook(std::function<void()> hook) = 0;
  virtual void synchronize() = 0;

  // Flat gradient buffer: layer l occupies [l*hidden*hidden, (l+1)*hidden*hidden).
  virtual float* gradients() = 0;
  // Host copies into and out of the first n floats of the gradient buffer, ordered with all
  // work issued before. The collective self-check uses the buffer before step 1.
  virtual void write_gradients(const float* host, size_t n) = 0;
  virtual void read_gradients(float* host, size_t n) = 0;
  virtual void optimizer_step(int64_t step) = 0;

  // Copies of the parameters and optimizer state to and from the host (checkpoint, restore).
  virtual void export_state(TrainingState& state) = 0;
  virtual void import_state(const TrainingState& state) = 0;
  // `state` is a host copy export_state fills for the whole run (a checkpoint's): a GPU backend
  // page-locks it, so each device-to-host copy runs at the link's speed instead of through a
  // staging buffer. False when it could not (the copies still work, slower). Unpin before the
  // copy's memory is freed.
  virtual bool pin_host_copy(TrainingState& state) {
    (void)state;
    return true;
  }
  virtual void unpin_host_copy(TrainingState& state) { (void)state; }
  // The state itself, stamped with `step`, when it lives in host memory: a synchronous checkpoint
  // then writes from where it lives, with no copy. nullptr when it lives on a device.
  virtual const TrainingState* host_resident_state(int64_t step) {
    (void)step;
    return nullptr;
  }

  // xxh3-128 of the parameters followed by the optimizer state.
  virtual Digest128 state_digest() = 0;
  // Test-only: flips the lowest bit of one parameter, to prove the replica check fires.
  virtual void perturb_state_for_test() = 0;

  virtual std::unique_ptr<PhaseClock> make_phase_clock() = 0;
  // FLOP/s of this backend's per-sample forward GEMM run alone, for the achieved-vs-peak figure.
  virtual double measure_gemm_rate(double min_seconds) = 0;
};

std::unique_ptr<ComputeBackend> make_cpu_backend();

}  // namespace tp
