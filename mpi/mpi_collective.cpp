#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "mpi/check.h"
#include "mpi/collective.h"
#include "mpi/mpi_operations.h"
#include "mpi/world.h"

namespace tp {
namespace {

class MpiCollective final : public Collective {
 public:
  // Takes ownership of `comm`.
  MpiCollective(MPI_Comm comm, bool sleep_while_waiting)
      : sleep_while_waiting_(sleep_while_waiting), comm_(comm) {
    mpiCheck(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCollective() override {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

  std::string name() const override { return "mpi"; }

  void start_allreduce_sum(float* data, size_t count) override {
    MPI_Request request;
    const double started = steady_seconds();
    mpiCheck(MPI_Iallreduce(MPI_IN_PLACE, data, checked_count(count), MPI_FLOAT, MPI_SUM, comm_,
                            &request));
    pending_.push_back(request);
    pending_bucket_.push_back(buckets_.size());
    buckets_.push_back({started, started});
  }

  void progress() override {
    if (!pending_.empty()) collect_completed(false);
  }

  void wait_all() override {
    while (!pending_.empty()) {
      collect_completed(!sleep_while_waiting_);
      if (sleep_while_waiting_ && !pending_.empty())
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  void allreduce_sum(float* data, size_t count) override {
    start_allreduce_sum(data, count);
    wait_all();
  }

  CommTiming take_comm_timing() override {
    CommTiming timing;
    timing.buckets.swap(buckets_);
    return timing;
  }

  int group_rank() const override { return rank_; }
  int group_size() const override { return size_; }
  std::string cannot_run(CollectiveOp op, ElementType type, bool in_place) const override {
    return mpi_cannot_run(op, type, in_place);
  }
  std::shared_ptr<void> allocate(size_t bytes) override {
    // Page-aligned, as a transport registering the buffer would want it.
    void* memory = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (!memory) throw RuntimeError("cannot allocate " + std::to_string(bytes) + " bytes");
    return std::shared_ptr<void>(memory, std::free);
  }
  void copy_in(void* buffer, const void* host, size_t bytes) override {
    std::memcpy(buffer, host, bytes);
  }
  void copy_out(void* host, const void* buffer, size_t bytes) override {
    std::memcpy(host, buffer, bytes);
  }
  const void* run(const CollectiveCall& call) override {
    if (const std::string problem = invalid_call(call, size_); !problem.empty())
      throw RuntimeError("invalid collective call: " + problem);
    return run_mpi_operation(comm_, rank_, size_, call);
  }
  void synchronize() override {}  // every MPI operation here is blocking
  std::unique_ptr<Collective> split(int color, int key) override {
    MPI_Comm group = MPI_COMM_NULL;
    mpiCheck(MPI_Comm_split(comm_, color, key, &group));
    return std::make_unique<MpiCollective>(group, sleep_while_waiting_);
  }

  std::string timing_method(bool overlap) const override {
    std::string method =
        std::string(overlap ? "MPI_Iallreduce per bucket, posted between backward layers"
                            : "MPI_Iallreduce per bucket, all posted after compute") +
        "; a bucket runs from its post to its completion as the host observes it (MPI_Testsome "
        "between GEMMs, MPI_Waitsome after compute): an upper bound; steady_clock";
    if (sleep_while_waiting_)
      method += "; ranks outnumber cores, so waiters sleep 20 us between MPI_Testsome calls";
    return method;
  }

 private:
  static int checked_count(size_t count) {
    if (count > size_t(INT_MAX))
      throw RuntimeError("allreduce bucket of " + std::to_string(count) +
                         " floats exceeds MPI's int count");
    return static_cast<int>(count);
  }

  // Marks the buckets that completed since the last look, and drops their requests. `block`
  // waits for at least one (MPI_Waitsome busy-polls); otherwise it only tests. When ranks
  // outnumber cores a polling rank steals the core from a rank still computing, which then looks
  // like a straggler, so such waiters test and sleep instead.
  void collect_completed(bool block) {
    int done = 0;
    completed_.resize(pending_.size());  // reused: this runs between every two GEMMs
    const int n = static_cast<int>(pending_.size());
    if (block)
      mpiCheck(MPI_Waitsome(n, pending_.data(), &done, completed_.data(), MPI_STATUSES_IGNORE));
    else
      mpiCheck(MPI_Testsome(n, pending_.data(), &done, completed_.data(), MPI_STATUSES_IGNORE));
    if (done == MPI_UNDEFINED || done == 0) return;
    const double now = steady_seconds();
    for (int i = 0; i < done; ++i)
      buckets_[pending_bucket_[size_t(completed_[size_t(i)])]].end = now;
    // Completed requests are MPI_REQUEST_NULL now: keep the others, in order.
    size_t kept = 0;
    for (size_t i = 0; i < pending_.size(); ++i)
      if (pending_[i] != MPI_REQUEST_NULL) {
        pending_[kept] = pending_[i];
        pending_bucket_[kept++] = pending_bucket_[i];
      }
    pending_.resize(kept);
    pending_bucket_.resize(kept);
  }

  const bool sleep_while_waiting_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::vector<MPI_Request> pending_;
  std::vector<size_t> pending_bucket_;  // [pending request]: its index in buckets_
  std::vector<int> completed_;          // MPI_Testsome's answer: indices into pending_
  std::vector<BucketTime> buckets_;     // since the last take_comm_timing
};

}  // namespace

std::unique_ptr<Collective> make_mpi_collective(const World& world, bool sleep_while_waiting) {
  MPI_Comm comm = MPI_COMM_NULL;
  mpiCheck(MPI_Comm_dup(world.comm, &comm));
  return std::make_unique<MpiCollective>(comm, sleep_while_waiting);
}

}  // namespace tp
