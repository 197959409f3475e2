#pragma once
// Gradient shaping: the reason every digest is independent of reduction order and world size.
//
// Each sample's gradient contribution g/G (G = global batch) is rounded onto the grid 2^-20 and
// clamped to at most floor(2^24 / G) grid units. Then every partial sum of any subset of the G
// contributions is an integer number of units below 2^24 in magnitude, which fp32 represents
// exactly. Summation is therefore exact, hence associative: a rank's local sum, MPI's or NCCL's
// reduction tree, and the partition of samples over ranks cannot change a single bit.
#include <cstddef>
#include <cstdint>

#include "common/host_device.h"

namespace tp {

inline constexpr int kGradQuantumLog2 = 20;  // grid step 2^-20 ~ 1e-6

struct GradGrid {
  float to_units;   // 2^20 / G: a per-sample gradient times this is its contribution in grid units
  float max_units;  // floor(2^24 / G): per-sample clamp that keeps all partial sums exact
  float quantum;    // 2^-20
};

inline GradGrid make_grad_grid(int64_t global_batch) {
  const int64_t units_total = int64_t{1} << 24;     // the largest exactly summable integer span
  const int64_t rounding_limit = int64_t{1} << 22;  // round_to_integer is exact below this
  int64_t max_units = units_total / global_batch;
  if (max_units > rounding_limit) max_units = rounding_limit;
  return {static_cast<float>(double(1 << kGradQuantumLog2) / double(global_batch)),
          static_cast<float>(max_units), 1.0f / float(1 << kGradQuantumLog2)};
}

// Rounds x (|x| <= 2^22) to the nearest integer, ties to even, without a libm call so the loop
// vectorises and CPU and GPU agree bit for bit.
TP_HD inline float round_to_integer(float x) {
  const float magic = 12582912.0f;  // 1.5 * 2^23
  return (x + magic) - magic;
}

TP_HD inline float shape_contribution(float sample_grad, const GradGrid& grid) {
  float units = sample_grad * grid.to_units;
  if (!(units == units)) units = 0.0f;  // NaN carries no information and would poison the sum
  units = units > grid.max_units ? grid.max_units : units;
  units = units < -grid.max_units ? -grid.max_units : units;
  return round_to_integer(units) * grid.quantum;
}

// accumulator[i] += shape_contribution(sample_grad[i]) for i < n. Out of line so it is compiled
// once per instruction set (grad_shaping.cpp); every variant performs the same IEEE operations.
void shape_and_accumulate(const float* sample_grad, float* accumulator, size_t n,
                          const GradGrid& grid);

}  // namespace tp
