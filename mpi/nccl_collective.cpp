// NCCL allreduce on the compute backend's device, on a communication stream of its own, ordered
// after the compute stream through events. The communicator is non-blocking (blocking=0), so
// every wait is a poll that a watchdog deadline can end with ncclCommAbort.
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/cuda_check.h"
#include "mpi/check.h"
#include "mpi/collective.h"
#include "mpi/comm_deadline.h"
#include "mpi/deadline_poll.h"
#include "mpi/gpu_collectives.h"
#include "mpi/nccl_operations.h"
#include "mpi/world.h"

namespace tp {
namespace {

using Clock = std::chrono::steady_clock;  // the destructor's finalize wait

[[noreturn]] void throw_nccl(ncclResult_t r, const char* what) {
  throw RuntimeError(std::string(what) + ": NCCL: " + ncclGetErrorString(r));
}

// One bucket's start and end on the NCCL stream.
struct BucketEvents {
  cudaEvent_t start = nullptr, end = nullptr;
};

class NcclCollective final : public Collective {
 public:
  NcclCollective(const World& world, DeviceStream& compute,
                 std::shared_ptr<const CommDeadline> deadline,
                 std::function<std::string(const std::string&)> on_timeout)
      : compute_(compute), deadline_(std::move(deadline)), on_timeout_(std::move(on_timeout)) {
    cudaCheck(cudaSetDevice(compute.device_index()));
    ncclUniqueId id{};
    if (world.rank == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    mpiCheck(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, world.comm));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const ncclResult_t r = ncclCommInitRankConfig(&comm_, world.size, id, world.rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
      if (comm_) fail(r, "ncclCommInitRankConfig");
      throw_nccl(r, "ncclCommInitRankConfig");
    }
    wait_ready("ncclCommInitRankConfig (communicator set-up)");
    create_stream_and_events();
  }

  // A group split from a parent's communicator (`comm` may still be in progress).
  NcclCollective(ncclComm_t comm, DeviceStream& compute,
                 std::shared_ptr<const CommDeadline> deadline,
                 std::function<std::string(const std::string&)> on_timeout)
      : compute_(compute),
        deadline_(std::move(deadline)),
        on_timeout_(std::move(on_timeout)),
        comm_(comm) {
    cudaCheck(cudaSetDevice(compute.device_index()));
    wait_ready("ncclCommSplit (group set-up)");
    create_stream_and_events();
  }

  ~NcclCollective() override {
    // A clean finalize needs every peer; while an exception unwinds (a failed rank, the
    // watchdog) or when finalizing does not settle in time, abort instead of blocking the exit.
    if (comm_ && !aborted_) {
      ncclResult_t state = std::uncaught_exceptions() ? ncclInternalError : ncclCommFinalize(comm_);
      const auto deadline = Clock::now() + std::chrono::seconds(30);
      while (state == ncclInProgress && Clock::now() < deadline)
        ncclCommGetAsyncError(comm_, &state);
      if (state == ncclSuccess)
        ncclCommDestroy(comm_);
      else
        ncclCommAbort(comm_);
    }
    for (const BucketEvents& b : buckets_)
      for (cudaEvent_t e : {b.start, b.end}) cudaEventDestroy(e);
    for (cudaEvent_t e : {ready_, compute_done_})
      if (e) cudaEventDestroy(e);
    if (stream_) cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "nccl"; }

  void start_allreduce_sum(float* data, size_t count) override {
    cudaCheck(cudaEventRecord(ready_, compute_.stream()));
    cudaCheck(cudaStreamWaitEvent(stream_, ready_, 0));
    const BucketEvents& bucket = next_bucket_events();
    cudaCheck(cudaEventRecord(bucket.start, stream_));
    const ncclResult_t r = ncclAllReduce(data, data, count, ncclFloat, ncclSum, comm_, stream_);
    if (r != ncclSuccess && r != ncclInProgress) fail(r, "ncclAllReduce");
    wait_ready("ncclAllReduce (enqueue)");
    cudaCheck(cudaEventRecord(bucket.end, stream_));
    pending_ = true;
  }

  bool posting_waits_for_peers() const override { return true; }
  void progress() override {}  // NCCL's kernels and proxy thread progress on their own

  void wait_all() override {
    if (!pending_ || started_ == 0) return;
    // Compute has all been issued: this event's time is compute's end on the device.
    cudaCheck(cudaEventRecord(compute_done_, compute_.stream()));
    const cudaEvent_t last_end = buckets_[started_ - 1].end;
    // The watchdog: poll the last bucket's event and the communicator's error state. Only then
    // does compute wait on it: after an abort it would wait for a kernel that never ends.
    poll_until([last_end] { return cudaEventQuery(last_end); }, "ncclAllReduce");
    cudaCheck(cudaStreamWaitEvent(compute_.stream(), last_end, 0));
    pending_ = false;
  }

  void allreduce_sum(float* data, size_t count) override {
    start_allreduce_sum(data, count);
    wait_all();
  }

  CommTiming take_comm_timing() override {
    CommTiming timing;
    if (started_ == 0) return timing;
    const cudaEvent_t origin = buckets_[0].start;
    cudaCheck(cudaEventSynchronize(buckets_[started_ - 1].end));
    cudaCheck(cudaEventSynchronize(compute_done_));
    auto seconds = [](cudaEvent_t from, cudaEvent_t to) {
      float ms = 0;
      cudaCheck(cudaEventElapsedTime(&ms, from, to));
      return double(ms) * 1e-3;
    };
    for (size_t i = 0; i < started_; ++i)
      timing.buckets.push_back(
          {seconds(origin, buckets_[i].start), seconds(origin, buckets_[i].end)});
    timing.exposed = std::max(0.0, seconds(compute_done_, buckets_[started_ - 1].end));
    started_ = 0;
    return timing;
  }

  std::string timing_method(bool overlap) const override {
    return std::string(overlap ? "ncclAllReduce per bucket, enqueued between backward layers"
                               : "ncclAllReduce per bucket, all enqueued after compute") +
           "; CUDA events on the NCCL stream around each bucket, and comm_exposed from "
           "compute's end to the last bucket's end, both on the device";
  }

  int group_rank() const override { return rank_; }
  int group_size() const override { return size_; }
  std::string cannot_run(CollectiveOp op, ElementType type, bool in_place) const override {
    return nccl_cannot_run(op, type, in_place);
  }
  std::shared_ptr<void> allocate(size_t bytes) override {
    void* memory = nullptr;
    cudaCheck(cudaMalloc(&memory, bytes > 0 ? bytes : 1));
    return std::shared_ptr<void>(memory, [](void* p) { cudaFree(p); });
  }
  void copy_in(void* buffer, const void* host, size_t bytes) override {
    cudaCheck(cudaMemcpy(buffer, host, bytes, cudaMemcpyHostToDevice));
  }
  void copy_out(void* host, const void* buffer, size_t bytes) override {
    cudaCheck(cudaMemcpy(host, buffer, bytes, cudaMemcpyDeviceToHost));
  }
  const void* run(const CollectiveCall& call) override {
    if (const std::string problem = invalid_call(call, size_); !problem.empty())
      throw RuntimeError("invalid collective call: " + problem);
    const void* result = call.recv;
    const ncclResult_t r = enqueue_nccl_operation(comm_, stream_, rank_, size_, call, &result);
    if (r != ncclSuccess && r != ncclInProgress) fail(r, "NCCL sweep operation");
    wait_ready("NCCL sweep operation (enqueue)");
    return result;
  }
  void synchronize() override {
    poll_until([this] { return cudaStreamQuery(stream_); }, "NCCL sweep operation");
  }
  std::unique_ptr<Collective> split(int color, int key) override {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t group = nullptr;
    const ncclResult_t r = ncclCommSplit(comm_, color, key, &group, &config);
    if (r != ncclSuccess && r != ncclInProgress) fail(r, "ncclCommSplit");
    return std::make_unique<NcclCollective>(group, compute_, deadline_, on_timeout_);
  }

 private:
  // Waits until `query` answers cudaSuccess, failing on an asynchronous NCCL error and aborting the
  // communicator when the deadline passes.
  template <class Query>
  void poll_until(Query query, const char* what) {
    const double started = steady_seconds();
    auto done = [&] {
      const cudaError_t answer = query();
      if (answer == cudaSuccess) return true;
      if (answer != cudaErrorNotReady) cudaCheck(answer);
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      if (state != ncclSuccess && state != ncclInProgress) fail(state, what);
      return false;
    };
    poll_until_deadline(
        done, [&] { return deadline_->passed(started); }, [&] { abort_after(what); },
        std::chrono::microseconds(20));
  }

  void create_stream_and_events() {
    check(ncclCommUserRank(comm_, &rank_), "ncclCommUserRank");
    check(ncclCommCount(comm_, &size_), "ncclCommCount");
    // The highest priority, so the compute stream's GEMMs cannot starve the reduction kernels.
    int least = 0, greatest = 0;
    cudaCheck(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    cudaCheck(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, greatest));
    cudaCheck(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    cudaCheck(cudaEventCreate(&compute_done_));
  }
  // The events of the step's next bucket, created once and reused every step.
  const BucketEvents& next_bucket_events() {
    if (started_ == buckets_.size()) {
      BucketEvents b;
      cudaCheck(cudaEventCreate(&b.start));
      cudaCheck(cudaEventCreate(&b.end));
      buckets_.push_back(b);
    }
    return buckets_[started_++];
  }
  void check(ncclResult_t r, const char* what) {
    if (r != ncclSuccess) throw_nccl(r, what);
  }
  // A non-blocking communicator answers ncclInProgress until the call has taken effect.
  void wait_ready(const char* what) {
    const double started = steady_seconds();
    auto ready = [&] {
      ncclResult_t state = ncclInProgress;
      check(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError");
      if (state != ncclSuccess && state != ncclInProgress) fail(state, what);
      return state == ncclSuccess;
    };
    poll_until_deadline(
        ready, [&] { return deadline_->passed(started); }, [&] { abort_after(what); },
        std::chrono::microseconds(0));
  }
  // NCCL requires an abort after an asynchronous error; the communicator is unusable after it.
  [[noreturn]] void fail(ncclResult_t r, const char* what) {
    ncclCommAbort(comm_);
    aborted_ = true;
    throw_nccl(r, what);
  }
  [[noreturn]] void abort_after(const char* what) {
    char limit[96];
    std::snprintf(limit, sizeof limit, "%.1f s of this rank's last progress%s",
                  deadline_->seconds(), deadline_->in_set_up() ? " (the set-up allowance)" : "");
    const std::string stalled = std::string(what) + " did not complete within " + limit;
    // The evidence is gathered before the abort, while the other ranks' state is still there.
    const std::string missing = on_timeout_ ? on_timeout_(stalled) : "";
    ncclCommAbort(comm_);
    aborted_ = true;
    throw RuntimeError("watchdog: " + stalled + "; NCCL communicator aborted" +
                       (missing.empty() ? "" : "; " + missing));
  }

  DeviceStream& compute_;
  std::shared_ptr<const CommDeadline> deadline_;
  std::function<std::string(const std::string&)> on_timeout_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr, compute_done_ = nullptr;
  std::vector<BucketEvents> buckets_;
  size_t started_ = 0;  // buckets started since the last take_comm_timing
  int rank_ = 0, size_ = 1;
  bool pending_ = false, aborted_ = false;
};

}  // namespace

std::unique_ptr<Collective> make_nccl_collective(
    const World& world, DeviceStream& compute, std::shared_ptr<const CommDeadline> deadline,
    std::function<std::string(const std::string&)> on_timeout) {
  return std::make_unique<NcclCollective>(world, compute, std::move(deadline),
                                          std::move(on_timeout));
}

}  // namespace tp
