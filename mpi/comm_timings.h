#pragma once
// How long each communicator took to set up, its first collective of each kind, and the steady
// ones after (docs/architecture.md, "Communicator set-up"). Since NCCL 2.22 connections are made
// lazily at the first collective of each algorithm, so set-up alone looks fast and the first
// allreduce or alltoall pays for it; at thousands of ranks both are paid again at every restart.
// The collective decorator (mpi/collective_ledger.h) records into this process's log; a stage
// gathers every rank's at rank 0 (app/stages/comm_times.h).
#include <array>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "mpi/collective.h"

namespace tp {

// The kinds of communicator a rank records: the world, and every split from it.
inline constexpr int kCommKinds = 2;
inline constexpr const char* kCommKindNames[kCommKinds] = {"world", "split"};
inline constexpr int kCommOps = 6;  // CollectiveOp's values
// The steady figure is the median of at most this many later calls per operation.
inline constexpr size_t kSteadySamples = 256;

// One rank's figures as numbers, in a fixed order (comm_time_slots), -1 where nothing was timed:
// per kind, set-up, then each operation's first call, then its steady median.
inline constexpr int kCommTimeSlots = kCommKinds * (1 + 2 * kCommOps);
int set_up_slot(int kind);
int first_slot(int kind, CollectiveOp op);
int steady_slot(int kind, CollectiveOp op);

class CommTimeLog {
 public:
  void clear();
  // `label`: "world" or a split's "world:<color>".
  void set_up(const std::string& label, double seconds);
  void first(const std::string& label, CollectiveOp op, double seconds);
  void steady(const std::string& label, CollectiveOp op, double seconds);
  std::array<double, kCommTimeSlots> slots() const;

 private:
  mutable std::mutex mutex_;
  std::array<double, kCommTimeSlots> fixed_{};  // set-up and first calls; 0 until set
  std::array<bool, kCommTimeSlots> set_{};
  std::array<std::array<std::vector<double>, kCommOps>, kCommKinds> steady_{};
};

CommTimeLog& process_comm_times();

// NCCL's own account of a communicator's set-up, from its `Init timings` line (NCCL_DEBUG=INFO,
// NCCL_DEBUG_SUBSYS=INIT; NCCL 2.23 and later): seconds in total and by part.
struct NcclInitTimings {
  int rank = -1, nranks = 0;
  double total = 0;
  std::vector<std::pair<std::string, double>> parts;  // kernels, alloc, bootstrap, ...
};
// The timings in `line`, or nothing when it is not such a line.
std::optional<NcclInitTimings> parse_nccl_init_timings(const std::string& line);

}  // namespace tp
