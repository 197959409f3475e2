#include "common/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tp {

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double position = std::clamp(p, 0.0, 100.0) / 100.0 * double(values.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(below + 1, values.size() - 1);
  const double fraction = position - double(below);
  return values[below] + (values[above] - values[below]) * fraction;
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
