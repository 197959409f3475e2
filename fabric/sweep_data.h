#pragma once
// What every rank puts into a sweep's collective and what it must get back, computed from the
// rank and the element index alone (docs/sweep.md, "Correctness"): no result is ever compared
// with another rank's, so a wrong element is found by the rank that holds it, on every row,
// outside the timed region. Values are small integers, exact in every element type: the largest
// input is chosen so that a sum over every rank stays exact (n x max <= 256 in bf16).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fabric/bus_bandwidth.h"

namespace tp {

std::string sweep_type_name(ElementType type);  // "float32", "int32", "bfloat16", "float16"
size_t sweep_type_bytes(ElementType type);

// The most ranks whose sum `type` holds exactly with inputs of 0 and 1 (bf16 256, fp16 2048): a
// larger group cannot be checked exactly in that type.
int64_t most_exact_ranks(ElementType type);
// The largest input value for `ranks` ranks in `type`: every sum of `ranks` inputs is exact.
int64_t largest_input(ElementType type, int ranks);
// The input of `rank` at element `index`, in [0, largest_input].
int64_t input_value(ElementType type, int ranks, int rank, uint64_t index);

// `values` small integers as the element type's bytes, and back (exact for these integers).
std::vector<unsigned char> encode(ElementType type, const std::vector<int64_t>& values);
int64_t decode_element(ElementType type, const unsigned char* element);

// Element counts of one row: what each rank sends and receives. `count` is the row's element
// count as the table prints it (nccl-tests' convention: the whole buffer for allreduce,
// broadcast, sendrecv and alltoall, the gathered output for allgather, the input for
// reducescatter); it must be a multiple of `ranks` for allgather, reducescatter and alltoall.
struct RowShape {
  uint64_t send_count = 0;
  uint64_t recv_count = 0;
};
RowShape row_shape(CollectiveOp op, int ranks, uint64_t count);

// The sum over every rank of input_value(type, ranks, r, index), in constant time per index once
// built (a reduction's expected value at 512 ranks would otherwise cost 512 inputs per element).
class RankSum {
 public:
  RankSum(ElementType type, int ranks);
  int64_t at(uint64_t index) const;

 private:
  uint64_t modulus_, ranks_, rank_parts_ = 0;
  std::vector<uint64_t> at_least_;  // [k]: ranks whose part is >= k
};

// This rank's input for the row, and the output it must receive (broadcast's root is rank 0;
// sendrecv sends to rank + 1 and receives from rank - 1).
std::vector<int64_t> row_input(CollectiveOp op, ElementType type, int ranks, int rank,
                               uint64_t count);
std::vector<int64_t> row_expected(CollectiveOp op, ElementType type, int ranks, int rank,
                                  uint64_t count);

// Elements of `received` (recv_count elements of `type`) that differ from `expected`.
uint64_t count_wrong(ElementType type, const unsigned char* received,
                     const std::vector<int64_t>& expected);

}  // namespace tp
