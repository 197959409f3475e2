#include "mpi/mpi_operations.h"

#include <climits>

#include "mpi/check.h"

namespace tp {
namespace {

MPI_Datatype mpi_type(ElementType type) {
  return type == ElementType::i32 ? MPI_INT : MPI_FLOAT;
}

int mpi_count(size_t count) {
  if (count > size_t(INT_MAX))
    throw RuntimeError(std::to_string(count) + " elements exceed MPI's int count");
  return int(count);
}

const void* input(const CollectiveCall& c) {
  return c.in_place ? MPI_IN_PLACE : c.send;
}

// Both directions are posted before either completes, so a pair exchanging at once never waits
// on the other's receive.
void send_and_receive(MPI_Comm comm, const CollectiveCall& c) {
  const MPI_Datatype type = mpi_type(c.type);
  // In place, as nccl-tests' sendrecv_perf runs it: one buffer sent and received into, which
  // MPI does safely with MPI_Sendrecv_replace.
  if (c.in_place && c.send_to >= 0 && c.recv_from >= 0) {
    mpiCheck(MPI_Sendrecv_replace(c.recv, mpi_count(c.recv_count), type, c.send_to, 0, c.recv_from,
                                  0, comm, MPI_STATUS_IGNORE));
    return;
  }
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  if (c.recv_from >= 0)
    mpiCheck(MPI_Irecv(c.recv, mpi_count(c.recv_count), type, c.recv_from, 0, comm, &requests[0]));
  if (c.send_to >= 0)
    mpiCheck(MPI_Isend(c.send, mpi_count(c.send_count), type, c.send_to, 0, comm, &requests[1]));
  mpiCheck(MPI_Waitall(2, requests, MPI_STATUSES_IGNORE));
}

}  // namespace

// Every operation has an in-place form in MPI (sendrecv's is MPI_Sendrecv_replace).
std::string mpi_cannot_run(CollectiveOp, ElementType type, bool) {
  if (type == ElementType::bf16 || type == ElementType::f16)
    return "MPI has no 16-bit floating-point type (bf16 and fp16 need comm.backend=nccl)";
  return "";
}

const void* run_mpi_operation(MPI_Comm comm, int rank, int size, const CollectiveCall& c) {
  const MPI_Datatype type = mpi_type(c.type);
  switch (c.op) {
    case CollectiveOp::allreduce:
      mpiCheck(MPI_Allreduce(input(c), c.recv, mpi_count(c.recv_count), type, MPI_SUM, comm));
      return c.recv;
    case CollectiveOp::allgather:
      mpiCheck(MPI_Allgather(input(c), mpi_count(c.send_count), type, c.recv,
                             mpi_count(c.send_count), type, comm));
      return c.recv;
    case CollectiveOp::reducescatter:
      // In place, MPI leaves this rank's block at the start of the buffer.
      mpiCheck(
          MPI_Reduce_scatter_block(input(c), c.recv, mpi_count(c.recv_count), type, MPI_SUM, comm));
      return c.recv;
    case CollectiveOp::broadcast: {
      // The root sends from its input, so out of place its result is that input.
      void* buffer = rank == c.root && !c.in_place ? const_cast<void*>(c.send) : c.recv;
      mpiCheck(MPI_Bcast(buffer, mpi_count(c.recv_count), type, c.root, comm));
      return buffer;
    }
    case CollectiveOp::alltoall: {
      const int block = mpi_count(c.recv_count / size_t(size));
      mpiCheck(MPI_Alltoall(input(c), block, type, c.recv, block, type, comm));
      return c.recv;
    }
    case CollectiveOp::sendrecv:
      send_and_receive(comm, c);
      return c.recv;
  }
  return c.recv;
}

}  // namespace tp
