#include "mpi/nccl_operations.h"

namespace tp {
namespace {

ncclDataType_t nccl_type(ElementType type) {
  switch (type) {
    case ElementType::f32:
      return ncclFloat32;
    case ElementType::i32:
      return ncclInt32;
    case ElementType::bf16:
      return ncclBfloat16;
    case ElementType::f16:
      return ncclFloat16;
  }
  return ncclFloat32;
}

size_t element_bytes(ElementType type) {
  return type == ElementType::bf16 || type == ElementType::f16 ? 2 : 4;
}

const char* at(const void* base, size_t elements, ElementType type) {
  return static_cast<const char*>(base) + elements * element_bytes(type);
}

// A group of point-to-point calls completes as one; on a non-blocking communicator the group's
// end answers ncclInProgress until it has been enqueued.
ncclResult_t end_group(ncclResult_t first) {
  const ncclResult_t end = ncclGroupEnd();
  return first != ncclSuccess && first != ncclInProgress ? first : end;
}

ncclResult_t alltoall(ncclComm_t comm, cudaStream_t stream, int ranks, const CollectiveCall& c) {
  const size_t block = c.send_count / size_t(ranks);
  const ncclDataType_t type = nccl_type(c.type);
  ncclResult_t r = ncclGroupStart();
  for (int peer = 0; peer < ranks && (r == ncclSuccess || r == ncclInProgress); ++peer) {
    r = ncclSend(at(c.send, block * size_t(peer), c.type), block, type, peer, comm, stream);
    if (r == ncclSuccess || r == ncclInProgress)
      r = ncclRecv(const_cast<char*>(at(c.recv, block * size_t(peer), c.type)), block, type, peer,
                   comm, stream);
  }
  return end_group(r);
}

ncclResult_t send_and_receive(ncclComm_t comm, cudaStream_t stream, const CollectiveCall& c) {
  const ncclDataType_t type = nccl_type(c.type);
  ncclResult_t r = ncclGroupStart();
  if (c.send_to >= 0) r = ncclSend(c.send, c.send_count, type, c.send_to, comm, stream);
  if (c.recv_from >= 0 && (r == ncclSuccess || r == ncclInProgress))
    r = ncclRecv(c.recv, c.recv_count, type, c.recv_from, comm, stream);
  return end_group(r);
}

}  // namespace

std::string nccl_cannot_run(CollectiveOp op, ElementType, bool in_place) {
  if (in_place && op == CollectiveOp::alltoall)
    return "NCCL's alltoall is grouped sends and receives, which cannot share one buffer";
  if (in_place && op == CollectiveOp::sendrecv) return "sendrecv has no in-place form";
  return "";
}

ncclResult_t enqueue_nccl_operation(ncclComm_t comm, cudaStream_t stream, int rank, int ranks,
                                    const CollectiveCall& c, const void** result) {
  const ncclDataType_t type = nccl_type(c.type);
  *result = c.recv;
  switch (c.op) {
    case CollectiveOp::allreduce:
      return ncclAllReduce(c.in_place ? c.recv : c.send, c.recv, c.recv_count, type, ncclSum, comm,
                           stream);
    case CollectiveOp::allgather:
      return ncclAllGather(c.in_place ? at(c.recv, c.send_count * size_t(rank), c.type) : c.send,
                           c.recv, c.send_count, type, comm, stream);
    case CollectiveOp::reducescatter: {
      // In place, NCCL leaves this rank's block where its share of the input was.
      void* out =
          c.in_place ? const_cast<char*>(at(c.recv, c.recv_count * size_t(rank), c.type)) : c.recv;
      *result = out;
      return ncclReduceScatter(c.in_place ? c.recv : c.send, out, c.recv_count, type, ncclSum, comm,
                               stream);
    }
    case CollectiveOp::broadcast:
      return ncclBroadcast(c.in_place ? c.recv : c.send, c.recv, c.recv_count, type, c.root, comm,
                           stream);
    case CollectiveOp::alltoall:
      return alltoall(comm, stream, ranks, c);
    case CollectiveOp::sendrecv:
      return send_and_receive(comm, stream, c);
  }
  return ncclInvalidArgument;
}

}  // namespace tp
