#pragma once
// The sweep's operations over MPI on host memory (mpi/collective.h CollectiveCall), for the MPI
// collective of mpi_collective.cpp.
#include <mpi.h>

#include <string>

#include "mpi/collective.h"

namespace tp {

// Why MPI cannot run `op` on `type`, or "": MPI has no 16-bit floating types.
std::string mpi_cannot_run(CollectiveOp op, ElementType type, bool in_place);

// Runs `call` on `comm`, where this process is `rank` of `size` (blocking), and returns where this
// rank's result is.
const void* run_mpi_operation(MPI_Comm comm, int rank, int size, const CollectiveCall& call);

}  // namespace tp
