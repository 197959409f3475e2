#include "common/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tp {

// Selection, not a sort: a report's phases summarise every rank's every step (800 k values at
// 4,096 ranks), and only two order statistics are needed. Same values as sorting gives.
double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  const double position = std::clamp(p, 0.0, 100.0) / 100.0 * double(values.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(position));
  const auto nth = values.begin() + std::ptrdiff_t(below);
  std::nth_element(values.begin(), nth, values.end());
  const double low = *nth;
  // Everything after the nth element is no smaller: the next order statistic is their minimum.
  const double high = below + 1 < values.size() ? *std::min_element(nth + 1, values.end()) : low;
  const double fraction = position - double(below);
  return low + (high - low) * fraction;
}

double median(std::vector<double> values) {
  return percentile(std::move(values), 50.0);
}

Summary summarize(const std::vector<double>& values) {
  Summary s;
  s.count = values.size();
  if (values.empty()) return s;
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  s.min = *lo;
  s.max = *hi;
  s.p50 = percentile(values, 50.0);
  s.p99 = percentile(values, 99.0);
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / double(values.size());
  return s;
}

std::vector<double> straggler_scores(const std::vector<double>& per_rank_compute) {
  const double typical = median(per_rank_compute);
  std::vector<double> scores;
  scores.reserve(per_rank_compute.size());
  for (double own : per_rank_compute) scores.push_back(own > 0.0 ? typical / own : 1.0);
  return scores;
}

}  // namespace tp
