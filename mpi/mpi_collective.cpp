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
    if (span_start_ < 0) span_start_ = started;
    pending_.push_back(request);
  }

  void progress() override {
    if (pending_.empty()) return;
    int done = 0;
    mpiCheck(MPI_Testall(static_cast<int>(pending_.size()), pending_.data(), &done,
                         MPI_STATUSES_IGNORE));
    if (done) finish_pending();
  }

  void wait_all() override {
    if (pending_.empty()) return;
    wait_for_pending();
    finish_pending();
  }

  void allreduce_sum(float* data, size_t count) override {
    const double started = steady_seconds();
    if (sleep_while_waiting_) {
      MPI_Request request;
      mpiCheck(MPI_Iallreduce(MPI_IN_PLACE, data, checked_count(count), MPI_FLOAT, MPI_SUM, comm_,
                              &request));
      std::vector<MPI_Request> one{request};
      pending_.swap(one);
      wait_for_pending();
      pending_.swap(one);
    } else {
      mpiCheck(MPI_Allreduce(MPI_IN_PLACE, data, checked_count(count), MPI_FLOAT, MPI_SUM, comm_));
    }
    blocking_seconds_ += steady_seconds() - started;
  }

  double take_comm_seconds() override {
    const double total = blocking_seconds_ + (span_start_ >= 0 ? span_end_ - span_start_ : 0.0);
    blocking_seconds_ = 0.0;
    span_start_ = span_end_ = -1.0;
    return total;
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
        overlap ? "MPI_Iallreduce buckets: first post to last completion, completion observed "
                  "at MPI_Testall between GEMMs or while waiting (an upper bound)"
                : "blocking allreduce per bucket: sum of the calls' durations";
    if (sleep_while_waiting_)
      method += "; ranks outnumber cores, so waiters sleep 20 us between MPI_Testall calls";
    return method;
  }

 private:
  static int checked_count(size_t count) {
    if (count > size_t(INT_MAX))
      throw RuntimeError("allreduce bucket of " + std::to_string(count) +
                         " floats exceeds MPI's int count");
    return static_cast<int>(count);
  }
  // MPI_Waitall busy-polls. When ranks outnumber cores, a polling rank steals the core from a rank
  // that is still computing, and the victim looks like a straggler; so the waiter sleeps between
  // tests instead, at the cost of up to one sleep of extra latency per wait.
  void wait_for_pending() {
    if (!sleep_while_waiting_) {
      mpiCheck(
          MPI_Waitall(static_cast<int>(pending_.size()), pending_.data(), MPI_STATUSES_IGNORE));
      return;
    }
    for (;;) {
      int done = 0;
      mpiCheck(MPI_Testall(static_cast<int>(pending_.size()), pending_.data(), &done,
                           MPI_STATUSES_IGNORE));
      if (done) return;
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  void finish_pending() {
    pending_.clear();
    span_end_ = steady_seconds();
  }

  const bool sleep_while_waiting_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::vector<MPI_Request> pending_;
  // Non-blocking buckets overlap one another, so they are timed as one span (first post to last
  // completion) rather than summed; blocking calls are summed.
  double span_start_ = -1.0, span_end_ = -1.0, blocking_seconds_ = 0.0;
};

}  // namespace

std::unique_ptr<Collective> make_mpi_collective(const World& world, bool sleep_while_waiting) {
  MPI_Comm comm = MPI_COMM_NULL;
  mpiCheck(MPI_Comm_dup(world.comm, &comm));
  return std::make_unique<MpiCollective>(comm, sleep_while_waiting);
}

}  // namespace tp
