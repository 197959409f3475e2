#pragma once
// The collectives `trainproof sweep` times, and how a time becomes bandwidth, as nccl-tests
// reports it (docs/sweep.md, "Bandwidth"): algbw is the bytes an operation moves per rank's
// buffer over its time, busbw scales algbw by what each link must carry for that operation, so
// it can be compared with the hardware's peak whatever the operation and the rank count.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mpi/collective.h"

namespace tp {

// Every operation, in the order the sweep runs and prints them.
const std::vector<CollectiveOp>& all_sweep_ops();
std::string sweep_op_name(CollectiveOp op);
// The operation named `name` (as sweep_op_name gives it), or nullopt.
std::optional<CollectiveOp> parse_sweep_op(const std::string& name);
// "allreduce,sendrecv" or "all" into operations, in the sweep's order, without repeats;
// UsageError naming `option` and the unknown word otherwise.
std::vector<CollectiveOp> parse_sweep_ops(const std::string& list, const std::string& option);

// busbw / algbw for `op` over `ranks` ranks: allreduce 2(n-1)/n; allgather, reducescatter and
// alltoall (n-1)/n; broadcast and sendrecv 1. 0 for allreduce, allgather, reducescatter and
// alltoall on one rank, where nothing crosses a link.
double busbw_factor(CollectiveOp op, int ranks);

// Decimal GB/s: `bytes` over `seconds` (0 for a time of 0 or less).
double algbw_gbps(uint64_t bytes, double seconds);
double busbw_gbps(CollectiveOp op, int ranks, uint64_t bytes, double seconds);

}  // namespace tp
