#pragma once
// The sweep's operations over NCCL on device memory (mpi/collective.h CollectiveCall), for the
// NCCL collective of nccl_collective.cpp. Only sources of the GPU library include it.
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "mpi/collective.h"

namespace tp {

// Why NCCL cannot run `op` (in place or not), or "".
std::string nccl_cannot_run(CollectiveOp op, ElementType type, bool in_place);

// Enqueues `call` on `stream` for `rank` of `ranks` and sets `result` to where this rank's output
// will be. Returns NCCL's answer (ncclInProgress on a non-blocking communicator).
ncclResult_t enqueue_nccl_operation(ncclComm_t comm, cudaStream_t stream, int rank, int ranks,
                                    const CollectiveCall& call, const void** result);

}  // namespace tp
