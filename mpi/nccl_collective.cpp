// NCCL allreduce on the compute backend's device, on a communication stream of its own, ordered
// after the compute stream through events. The communicator is non-blocking (blocking=0), so
// every wait is a poll that a watchdog deadline can end with ncclCommAbort.
#include <dlfcn.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
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
#include "mpi/comm_abort.h"
#include "mpi/comm_deadline.h"
#include "mpi/deadline_poll.h"
#include "mpi/gpu_collectives.h"
#include "mpi/nccl_operations.h"
#include "mpi/nccl_roots.h"
#include "mpi/world.h"

namespace tp {
namespace {

using Clock = std::chrono::steady_clock;  // the destructor's finalize wait

[[noreturn]] void throw_nccl(ncclResult_t r, const char* what) {
  throw RuntimeError(std::string(what) + ": NCCL: " + ncclGetErrorString(r));
}

// ncclCommInitRankScalable where the loaded NCCL has it, found at run time: the library is
// linked against the NCCL it was built with, and a site may load an older one.
using ScalableInit = ncclResult_t (*)(ncclComm_t*, int, int, int, ncclUniqueId*, ncclConfig_t*);
ScalableInit scalable_init() {
  static const ScalableInit found = [] {
    Dl_info info{};
    if (!dladdr(reinterpret_cast<void*>(&ncclGetVersion), &info) || !info.dli_fname)
      return ScalableInit(nullptr);
    void* nccl = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    return nccl ? reinterpret_cast<ScalableInit>(dlsym(nccl, "ncclCommInitRankScalable"))
                : ScalableInit(nullptr);
  }();
  return found;
}

// The oldest NCCL any rank loaded (a rank whose NCCL lacks the scalable call counts as older
// than 2.23), so every rank takes the same path; 0 when a rank cannot tell.
int job_nccl_version(const World& world) {
  int mine = 0;
  if (ncclGetVersion(&mine) != ncclSuccess) mine = 0;
  if (!scalable_init()) mine = std::min(mine, kNcclScalableInitVersion - 1);
  int oldest = 0;
  mpiCheck(MPI_Allreduce(&mine, &oldest, 1, MPI_INT, MPI_MIN, world.comm));
  return oldest;
}

// Every root's id at every rank: the roots create them, one MPI_Allgatherv spreads them
// (nccl_roots.h; a few KiB at 4,096 ranks).
std::vector<ncclUniqueId> gather_root_ids(const World& world, const NcclRootPlan& plan) {
  std::vector<ncclUniqueId> ids(plan.roots.size());
  ncclUniqueId mine{};
  const int index = root_index_of(plan, world.rank);
  if (index >= 0) {
    const ncclResult_t r = ncclGetUniqueId(&mine);
    if (r != ncclSuccess) throw_nccl(r, "ncclGetUniqueId");
  }
  std::vector<int> counts(size_t(world.size), 0), offsets(size_t(world.size), 0);
  for (size_t i = 0; i < plan.roots.size(); ++i) {
    counts[size_t(plan.roots[i])] = int(sizeof(ncclUniqueId));
    offsets[size_t(plan.roots[i])] = int(i * sizeof(ncclUniqueId));
  }
  mpiCheck(MPI_Allgatherv(&mine, index >= 0 ? int(sizeof mine) : 0, MPI_BYTE, ids.data(),
                          counts.data(), offsets.data(), MPI_BYTE, world.comm));
  return ids;
}

// One bucket's start and end on the NCCL stream.
struct BucketEvents {
  cudaEvent_t start = nullptr, end = nullptr;
};

class NcclCollective final : public Collective {
 public:
  NcclCollective(const World& world, DeviceStream& compute, const NcclOptions& options,
                 std::shared_ptr<const CommDeadline> deadline,
                 std::function<std::string(const std::string&)> on_timeout)
      : compute_(compute),
        options_(options),
        deadline_(std::move(deadline)),
        on_timeout_(std::move(on_timeout)) {
    cudaCheck(cudaSetDevice(compute.device_index()));
    const NcclRootPlan plan =
        plan_nccl_roots(world.size, options_.ranks_per_root, job_nccl_version(world));
    set_up_notes_.push_back(plan.note);
    std::vector<ncclUniqueId> ids = gather_root_ids(world, plan);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const ncclResult_t r =
        plan.scalable
            ? scalable_init()(&comm_, world.size, world.rank, int(ids.size()), ids.data(), &config)
            : ncclCommInitRankConfig(&comm_, world.size, ids[0], world.rank, &config);
    const char* call = plan.scalable ? "ncclCommInitRankScalable" : "ncclCommInitRankConfig";
    if (r != ncclSuccess && r != ncclInProgress) {
      if (comm_) fail(r, call);
      throw_nccl(r, call);
    }
    register_abort();
    wait_ready(plan.scalable ? "ncclCommInitRankScalable (communicator set-up)"
                             : "ncclCommInitRankConfig (communicator set-up)");
    create_stream_and_events();
  }

  // A group split from a parent's communicator (`comm` may still be in progress).
  NcclCollective(ncclComm_t comm, DeviceStream& compute, const NcclOptions& options,
                 std::shared_ptr<const CommDeadline> deadline,
                 std::function<std::string(const std::string&)> on_timeout)
      : compute_(compute),
        options_(options),
        deadline_(std::move(deadline)),
        on_timeout_(std::move(on_timeout)),
        comm_(comm) {
    cudaCheck(cudaSetDevice(compute.device_index()));
    register_abort();
    wait_ready("ncclCommSplit (group set-up)");
    create_stream_and_events();
  }

  ~NcclCollective() override {
    // A clean finalize needs every peer; while an exception unwinds (a failed rank, the
    // watchdog) or when finalizing does not settle in time, abort instead of blocking the exit.
    if (options_.aborts && abort_id_ >= 0) options_.aborts->remove(abort_id_);
    if (comm_ && !aborted_.load()) {
      ncclResult_t state = std::uncaught_exceptions() ? ncclInternalError : ncclCommFinalize(comm_);
      const auto deadline = Clock::now() + std::chrono::seconds(30);
      while (state == ncclInProgress && Clock::now() < deadline)
        ncclCommGetAsyncError(comm_, &state);
      if (state == ncclSuccess)
        ncclCommDestroy(comm_);
      else
        abort_bounded("destroying the communicator");
    }
    for (const BucketEvents& b : buckets_)
      for (cudaEvent_t e : {b.start, b.end}) cudaEventDestroy(e);
    for (cudaEvent_t e : {ready_, compute_done_})
      if (e) cudaEventDestroy(e);
    if (stream_) cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "nccl"; }
  std::vector<std::string> set_up_notes() const override { return set_up_notes_; }

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
    return std::make_unique<NcclCollective>(group, compute_, options_, deadline_, on_timeout_);
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
    abort_bounded(what);
    throw_nccl(r, what);
  }
  // ncclCommAbort within watchdog.abort_grace_s (mpi/comm_abort.h): an abort that does not
  // return ends the process with exit 3, after whatever record the caller wrote first.
  void abort_bounded(const char* what) {
    if (aborted_.exchange(true)) return;
    ncclComm_t comm = comm_;
    if (run_within([comm] { ncclCommAbort(comm); }, options_.abort_grace_s)) return;
    std::fprintf(stderr,
                 "trainproof: ncclCommAbort after %s did not return within %.1f s "
                 "(watchdog.abort_grace_s); ending this rank with exit 3\n",
                 what, options_.abort_grace_s);
    std::fflush(stderr);
    std::_Exit(3);
  }
  // The watchdog aborts every communicator of the process when it fires (train/watchdog.h).
  void register_abort() {
    if (!options_.aborts) return;
    abort_id_ = options_.aborts->add([this] {
      if (!aborted_.exchange(true)) ncclCommAbort(comm_);
    });
  }
  [[noreturn]] void abort_after(const char* what) {
    char limit[96];
    std::snprintf(limit, sizeof limit, "%.1f s of this rank's last progress%s",
                  deadline_->seconds(), deadline_->in_set_up() ? " (the set-up allowance)" : "");
    const std::string stalled = std::string(what) + " did not complete within " + limit;
    // The evidence is gathered before the abort, while the other ranks' state is still there.
    const std::string missing = on_timeout_ ? on_timeout_(stalled) : "";
    abort_bounded(what);
    throw RuntimeError("watchdog: " + stalled + "; NCCL communicator aborted" +
                       (missing.empty() ? "" : "; " + missing));
  }

  DeviceStream& compute_;
  NcclOptions options_;
  std::shared_ptr<const CommDeadline> deadline_;
  std::function<std::string(const std::string&)> on_timeout_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr, compute_done_ = nullptr;
  std::vector<BucketEvents> buckets_;
  size_t started_ = 0;  // buckets started since the last take_comm_timing
  int rank_ = 0, size_ = 1;
  bool pending_ = false;
  std::atomic<bool> aborted_{false};
  int abort_id_ = -1;
  std::vector<std::string> set_up_notes_;
};

}  // namespace

std::unique_ptr<Collective> make_nccl_collective(
    const World& world, DeviceStream& compute, const NcclOptions& options,
    std::shared_ptr<const CommDeadline> deadline,
    std::function<std::string(const std::string&)> on_timeout) {
  return std::make_unique<NcclCollective>(world, compute, options, std::move(deadline),
                                          std::move(on_timeout));
}

}  // namespace tp
