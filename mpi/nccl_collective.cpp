// NCCL allreduce on the compute backend's device, on a communication stream of its own, ordered
// after the compute stream through events. The communicator is non-blocking (blocking=0), so
// every wait is a poll that a watchdog deadline can end with ncclCommAbort.
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/cuda_check.h"
#include "mpi/check.h"
#include "mpi/collective.h"
#include "mpi/gpu_collectives.h"
#include "mpi/nccl_operations.h"
#include "mpi/world.h"

namespace tp {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void throw_nccl(ncclResult_t r, const char* what) {
  throw RuntimeError(std::string(what) + ": NCCL: " + ncclGetErrorString(r));
}

class NcclCollective final : public Collective {
 public:
  NcclCollective(const World& world, DeviceStream& compute, double timeout_s,
                 std::function<std::string(const std::string&)> on_timeout)
      : compute_(compute), timeout_s_(timeout_s), on_timeout_(std::move(on_timeout)) {
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
  NcclCollective(ncclComm_t comm, DeviceStream& compute, double timeout_s,
                 std::function<std::string(const std::string&)> on_timeout)
      : compute_(compute), timeout_s_(timeout_s), on_timeout_(std::move(on_timeout)), comm_(comm) {
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
    for (cudaEvent_t e : {ready_, first_start_, last_end_})
      if (e) cudaEventDestroy(e);
    if (stream_) cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "nccl"; }

  void start_allreduce_sum(float* data, size_t count) override {
    cudaCheck(cudaEventRecord(ready_, compute_.stream()));
    cudaCheck(cudaStreamWaitEvent(stream_, ready_, 0));
    if (!span_open_) {
      cudaCheck(cudaEventRecord(first_start_, stream_));
      span_open_ = true;
    }
    const ncclResult_t r = ncclAllReduce(data, data, count, ncclFloat, ncclSum, comm_, stream_);
    if (r != ncclSuccess && r != ncclInProgress) fail(r, "ncclAllReduce");
    wait_ready("ncclAllReduce (enqueue)");
    cudaCheck(cudaEventRecord(last_end_, stream_));
    pending_ = true;
  }

  void progress() override {}  // NCCL's kernels and proxy thread progress on their own

  void wait_all() override {
    if (!pending_) return;
    // The watchdog: poll the last bucket's event and the communicator's error state.
    poll_until([this] { return cudaEventQuery(last_end_); }, "ncclAllReduce");
    cudaCheck(cudaStreamWaitEvent(compute_.stream(), last_end_, 0));
    pending_ = false;
  }

  void allreduce_sum(float* data, size_t count) override {
    start_allreduce_sum(data, count);
    wait_all();
  }

  double take_comm_seconds() override {
    if (!span_open_) return 0.0;
    cudaCheck(cudaEventSynchronize(last_end_));
    float ms = 0;
    cudaCheck(cudaEventElapsedTime(&ms, first_start_, last_end_));
    span_open_ = false;
    return ms * 1e-3;
  }

  std::string timing_method(bool) const override {
    return "CUDA events on the NCCL stream: the first bucket's start to the last bucket's end";
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
    return std::make_unique<NcclCollective>(group, compute_, timeout_s_, on_timeout_);
  }

 private:
  // Waits until `query` answers cudaSuccess, failing on an asynchronous NCCL error and aborting the
  // communicator when the deadline passes.
  template <class Query>
  void poll_until(Query query, const char* what) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
    for (;;) {
      const cudaError_t done = query();
      if (done == cudaSuccess) return;
      if (done != cudaErrorNotReady) cudaCheck(done);
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      if (state != ncclSuccess && state != ncclInProgress) fail(state, what);
      if (Clock::now() > deadline) abort_after(what);
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  void create_stream_and_events() {
    check(ncclCommUserRank(comm_, &rank_), "ncclCommUserRank");
    check(ncclCommCount(comm_, &size_), "ncclCommCount");
    cudaCheck(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    cudaCheck(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    cudaCheck(cudaEventCreate(&first_start_));
    cudaCheck(cudaEventCreate(&last_end_));
  }
  void check(ncclResult_t r, const char* what) {
    if (r != ncclSuccess) throw_nccl(r, what);
  }
  // A non-blocking communicator answers ncclInProgress until the call has taken effect.
  void wait_ready(const char* what) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
    for (;;) {
      ncclResult_t state = ncclInProgress;
      check(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError");
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) fail(state, what);
      if (Clock::now() > deadline) abort_after(what);
      std::this_thread::yield();
    }
  }
  // NCCL requires an abort after an asynchronous error; the communicator is unusable after it.
  [[noreturn]] void fail(ncclResult_t r, const char* what) {
    ncclCommAbort(comm_);
    aborted_ = true;
    throw_nccl(r, what);
  }
  [[noreturn]] void abort_after(const char* what) {
    const std::string stalled =
        std::string(what) + " did not complete within " + std::to_string(timeout_s_) + " s";
    // The evidence is gathered before the abort, while the other ranks' state is still there.
    const std::string missing = on_timeout_ ? on_timeout_(stalled) : "";
    ncclCommAbort(comm_);
    aborted_ = true;
    throw RuntimeError("watchdog: " + stalled + "; NCCL communicator aborted" +
                       (missing.empty() ? "" : "; " + missing));
  }

  DeviceStream& compute_;
  double timeout_s_;
  std::function<std::string(const std::string&)> on_timeout_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr, first_start_ = nullptr, last_end_ = nullptr;
  int rank_ = 0, size_ = 1;
  bool pending_ = false, span_open_ = false, aborted_ = false;
};

}  // namespace

std::unique_ptr<Collective> make_nccl_collective(
    const World& world, DeviceStream& compute, double timeout_s,
    std::function<std::string(const std::string&)> on_timeout) {
  return std::make_unique<NcclCollective>(world, compute, timeout_s, std::move(on_timeout));
}

}  // namespace tp
