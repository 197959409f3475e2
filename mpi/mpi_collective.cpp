#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <vector>

#include "mpi/check.h"
#include "mpi/collective.h"
#include "mpi/world.h"

namespace tp {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class MpiCollective final : public Collective {
 public:
  explicit MpiCollective(const World& world) {
    mpiCheck(MPI_Comm_dup(world.comm, &comm_));
    mpiCheck(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  }
  ~MpiCollective() override {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

  std::string name() const override { return "mpi"; }
  MemoryKind memory() const override { return MemoryKind::host; }

  void start_allreduce_sum(float* data, size_t count) override {
    MPI_Request request;
    const double started = now_seconds();
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
    mpiCheck(MPI_Waitall(static_cast<int>(pending_.size()), pending_.data(), MPI_STATUSES_IGNORE));
    finish_pending();
  }

  void allreduce_sum(float* data, size_t count) override {
    const double started = now_seconds();
    mpiCheck(MPI_Allreduce(MPI_IN_PLACE, data, checked_count(count), MPI_FLOAT, MPI_SUM, comm_));
    blocking_seconds_ += now_seconds() - started;
  }

  double take_comm_seconds() override {
    const double total = blocking_seconds_ + (span_start_ >= 0 ? span_end_ - span_start_ : 0.0);
    blocking_seconds_ = 0.0;
    span_start_ = span_end_ = -1.0;
    return total;
  }

  std::string timing_method(bool overlap) const override {
    return overlap ? "MPI_Iallreduce buckets: first post to last completion, completion observed "
                     "at MPI_Testall between GEMMs or at MPI_Waitall (an upper bound)"
                   : "MPI_Allreduce buckets: sum of the blocking calls' durations";
  }

 private:
  static int checked_count(size_t count) {
    if (count > size_t(INT_MAX)) throw RuntimeError("allreduce bucket of " + std::to_string(count) +
                                                    " floats exceeds MPI's int count");
    return static_cast<int>(count);
  }
  void finish_pending() {
    pending_.clear();
    span_end_ = now_seconds();
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<MPI_Request> pending_;
  // Non-blocking buckets overlap one another, so they are timed as one span (first post to last
  // completion) rather than summed; blocking calls are summed.
  double span_start_ = -1.0, span_end_ = -1.0, blocking_seconds_ = 0.0;
};

}  // namespace

std::unique_ptr<Collective> make_mpi_collective(const World& world) {
  return std::make_unique<MpiCollective>(world);
}

}  // namespace tp
