// A host-memory collective (MPI) reducing device gradients: each bucket is copied to pinned host
// memory when it is started and back when it completes. This is how several ranks share one GPU
// for compute while communicating over MPI.
#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "common/cuda_check.h"
#include "mpi/collective.h"
#include "mpi/gpu_collectives.h"

namespace tp {
namespace {

class HostStagedCollective final : public Collective {
 public:
  HostStagedCollective(std::unique_ptr<Collective> inner, DeviceStream& compute)
      : inner_(std::move(inner)), compute_(compute) {}
  ~HostStagedCollective() override {
    if (host_) cudaFreeHost(host_);
  }

  std::string name() const override { return inner_->name(); }

  void start_allreduce_sum(float* data, size_t count) override {
    float* staged = to_host(data, count);
    inner_->start_allreduce_sum(staged, count);
    pending_.push_back({data, staged, count});
  }
  void progress() override { inner_->progress(); }
  void wait_all() override {
    inner_->wait_all();
    for (const Pending& p : pending_)
      cudaCheck(cudaMemcpyAsync(p.device, p.host, p.count * sizeof(float), cudaMemcpyHostToDevice,
                                compute_.stream()));
    pending_.clear();
  }
  void allreduce_sum(float* data, size_t count) override {
    float* staged = to_host(data, count);
    inner_->allreduce_sum(staged, count);
    cudaCheck(cudaMemcpyAsync(data, staged, count * sizeof(float), cudaMemcpyHostToDevice,
                              compute_.stream()));
  }
  CommTiming take_comm_timing() override { return inner_->take_comm_timing(); }

  // The sweep's operations work on the inner collective's own (host) memory: nothing to stage.
  int group_rank() const override { return inner_->group_rank(); }
  int group_size() const override { return inner_->group_size(); }
  std::string cannot_run(CollectiveOp op, ElementType type, bool in_place) const override {
    return inner_->cannot_run(op, type, in_place);
  }
  std::shared_ptr<void> allocate(size_t bytes) override { return inner_->allocate(bytes); }
  void copy_in(void* buffer, const void* host, size_t bytes) override {
    inner_->copy_in(buffer, host, bytes);
  }
  void copy_out(void* host, const void* buffer, size_t bytes) override {
    inner_->copy_out(host, buffer, bytes);
  }
  const void* run(const CollectiveCall& call) override { return inner_->run(call); }
  void synchronize() override { inner_->synchronize(); }
  std::unique_ptr<Collective> split(int color, int key) override {
    return inner_->split(color, key);
  }
  std::string timing_method(bool overlap) const override {
    return inner_->timing_method(overlap) +
           "; device gradients are staged through pinned host memory, and the copies count in "
           "compute and comm_exposed, not in the buckets' times";
  }

 private:
  struct Pending {
    float* device;
    float* host;
    size_t count;
  };

  // The host mirror has the gradient buffer's layout, so concurrent buckets never share memory.
  float* to_host(float* device, size_t count) {
    if (!host_) cudaCheck(cudaMallocHost(&host_, compute_.gradient_count() * sizeof(float)));
    float* staged = host_ + (device - compute_.gradients());
    cudaCheck(cudaMemcpyAsync(staged, device, count * sizeof(float), cudaMemcpyDeviceToHost,
                              compute_.stream()));
    // While the GPU catches up, keep the earlier buckets' MPI reductions moving: Open MPI has no
    // progress thread.
    for (;;) {
      const cudaError_t state = cudaStreamQuery(compute_.stream());
      if (state == cudaSuccess) break;
      if (state != cudaErrorNotReady) cudaCheck(state);
      inner_->progress();
    }
    return staged;
  }

  std::unique_ptr<Collective> inner_;
  DeviceStream& compute_;
  float* host_ = nullptr;
  std::vector<Pending> pending_;
};

}  // namespace

std::unique_ptr<Collective> stage_collective_through_host(std::unique_ptr<Collective> inner,
                                                          DeviceStream& compute) {
  return std::make_unique<HostStagedCollective>(std::move(inner), compute);
}

}  // namespace tp
