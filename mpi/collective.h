#pragma once
// The collective interface the step loop reduces gradients through. MPI implements it here; an
// NCCL implementation (device buffers, a communication stream) implements the same calls.
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tp {

struct World;

// The operations `trainproof sweep` times (docs/sweep.md).
enum class CollectiveOp { allreduce, allgather, reducescatter, broadcast, alltoall, sendrecv };
// Element types, named as model.dtype names them (fabric/sweep_data.h sweep_type_name).
enum class ElementType { f32, i32, bf16, f16 };

// One operation of the sweep. Counts are elements of `type` this rank sends and receives
// (fabric/sweep_data.h row_shape). In place, `recv` is the one buffer: the input is in it (for
// allgather at this rank's block) and the output lands in it. sendrecv, which is also the
// pairwise pass's transfer, sends to `send_to` and receives from `recv_from`, either -1 for none.
struct CollectiveCall {
  CollectiveOp op = CollectiveOp::allreduce;
  ElementType type = ElementType::f32;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t send_count = 0, recv_count = 0;
  bool in_place = false;
  int root = 0;  // broadcast
  int send_to = -1, recv_from = -1;
};

// One bucket's reduction on this rank, in seconds on one clock: when it started and when it was
// complete (see Collective::timing_method for what each backend can see).
struct BucketTime {
  double start = 0, end = 0;
};
// A step's communication on this rank.
struct CommTiming {
  std::vector<BucketTime> buckets;  // in the order they were started
  // The wait after compute, from compute's end to the last bucket's end, where the collective
  // times both on the device; nullopt where only the host's view exists.
  std::optional<double> exposed;
};
// The time any bucket was in flight: the union of the buckets' intervals.
double busy_seconds(std::vector<BucketTime> buckets);

class Collective {
 public:
  virtual ~Collective() = default;

  virtual std::string name() const = 0;
  // How the communicator was set up, for the report (NCCL's roots and why); none by default.
  virtual std::vector<std::string> set_up_notes() const { return {}; }

  // Starts an in-place fp32 sum over all ranks and returns at once. The reduction is ordered after
  // all compute work already issued for `data` (a GPU collective waits on the compute stream).
  virtual void start_allreduce_sum(float* data, size_t count) = 0;
  // True when start_allreduce_sum itself may wait for peers (NCCL's enqueue on a non-blocking
  // communicator); false when it waits at most for this rank's own device (a host-staged copy).
  virtual bool posting_waits_for_peers() const { return false; }
  // Lets the library advance started reductions; cheap, called between GEMMs.
  virtual void progress() = 0;
  // Blocks until every started reduction is complete.
  virtual void wait_all() = 0;
  // In-place fp32 sum over all ranks, blocking.
  virtual void allreduce_sum(float* data, size_t count) = 0;

  // The buckets started since the previous call, each timed (see timing_method()).
  virtual CommTiming take_comm_timing() = 0;
  // How take_comm_timing() was measured, for the report.
  virtual std::string timing_method(bool overlap) const = 0;

  // The sweep's operations (docs/sweep.md). A collective that implements only the step's
  // allreduce keeps these defaults: cannot_run says so, and the rest throw.

  // This rank's place in the collective's group, and the group's size.
  virtual int group_rank() const { return 0; }
  virtual int group_size() const { return 1; }
  // Why this backend cannot run `op` on `type` (in place or not), or "" when it can.
  virtual std::string cannot_run(CollectiveOp op, ElementType type, bool in_place) const;
  // Memory the operations work on (host memory for MPI, device memory for NCCL), freed with the
  // last owner, and copies between it and the host.
  virtual std::shared_ptr<void> allocate(size_t bytes);
  virtual void copy_in(void* buffer, const void* host, size_t bytes);
  virtual void copy_out(void* host, const void* buffer, size_t bytes);
  // Runs `call` (MPI) or enqueues it (NCCL) and returns where this rank's result is: `recv`,
  // except where a backend leaves it elsewhere (MPI's in-place reducescatter, at the start of the
  // buffer; MPI's broadcast root, whose result is its input).
  virtual const void* run(const CollectiveCall& call);
  // Returns once every operation run() has started on this rank is complete.
  virtual void synchronize();
  // A collective over the ranks that pass the same `color`, ranked by `key` (MPI_Comm_split's
  // rule); every rank of this group must call it.
  virtual std::unique_ptr<Collective> split(int color, int key);
};

// "" when `call`'s counts and peers are consistent for a group of `group_size` ranks, else why
// not; every backend checks a call with it before running it.
std::string invalid_call(const CollectiveCall& call, int group_size);

// `sleep_while_waiting`: yield the core between completion tests, for hosts where ranks outnumber
// cores (see MpiCollective::wait_for_pending).
std::unique_ptr<Collective> make_mpi_collective(const World& world, bool sleep_while_waiting);

}  // namespace tp
