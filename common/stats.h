#pragma once
// Cross-rank statistics. Pure functions over gathered samples, so they are unit-tested without MPI.
#include <string>
#include <vector>

namespace tp {

struct Summary {
  double min = 0, p50 = 0, p99 = 0, max = 0, mean = 0;
  size_t count = 0;
};

// Linear interpolation between closest ranks (numpy's default), p in [0, 100].
double percentile(std::vector<double> values, double p);
double median(std::vector<double> values);
Summary summarize(const std::vector<double>& values);

inline constexpr double kStragglerThreshold = 0.8;

// median over ranks of per-rank compute time, divided by each rank's own. A rank at 0.5 computes
// twice as slowly as the typical rank. Zero compute time scores 1 (nothing to compare).
std::vector<double> straggler_scores(const std::vector<double>& per_rank_compute);

}  // namespace tp
