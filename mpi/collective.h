#pragma once
// The collective interface the step loop reduces gradients through. MPI implements it here; an
// NCCL implementation (device buffers, a communication stream) implements the same calls.
#include <cstddef>
#include <memory>
#include <string>

namespace tp {

struct World;

class Collective {
 public:
  virtual ~Collective() = default;

  virtual std::string name() const = 0;

  // Starts an in-place fp32 sum over all ranks and returns at once. The reduction is ordered after
  // all compute work already issued for `data` (a GPU collective waits on the compute stream).
  virtual void start_allreduce_sum(float* data, size_t count) = 0;
  // Lets the library advance started reductions; cheap, called between GEMMs.
  virtual void progress() = 0;
  // Blocks until every started reduction is complete.
  virtual void wait_all() = 0;
  // In-place fp32 sum over all ranks, blocking.
  virtual void allreduce_sum(float* data, size_t count) = 0;

  // Seconds the collective itself took since the previous call (see timing_method()).
  virtual double take_comm_seconds() = 0;
  // How take_comm_seconds() was measured, for the report.
  virtual std::string timing_method(bool overlap) const = 0;
};

// `sleep_while_waiting`: yield the core between completion tests, for hosts where ranks outnumber
// cores (see MpiCollective::wait_for_pending).
std::unique_ptr<Collective> make_mpi_collective(const World& world, bool sleep_while_waiting);

}  // namespace tp
