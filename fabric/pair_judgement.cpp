#include "fabric/pair_judgement.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

namespace tp {
namespace {

double median_of(std::vector<double> values) {
  if (values.empty()) return -1;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

// The upper of the two middle values for an even count: below a threshold only when more than
// half the values are, so one slow link of a node's two pairs does not make the node slow.
double upper_median_of(std::vector<double> values) {
  if (values.empty()) return -1;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// The measured values of the pairs (a, b) that `keep` accepts.
std::vector<double> measured(const PairMatrix& m, const std::function<bool(int, int)>& keep) {
  std::vector<double> values;
  for (size_t a = 0; a < m.size(); ++a)
    for (size_t b = 0; b < m[a].size(); ++b)
      if (a != b && m[a][b] >= 0 && keep(int(a), int(b))) values.push_back(m[a][b]);
  return values;
}

}  // namespace

PairJudgement judge_pairs(const PairMatrix& m, double flag_fraction, double fail_fraction) {
  PairJudgement judgement;
  const int n = int(m.size());
  if (n < 3) {
    judgement.note = std::to_string(n) +
                     " node(s): no majority of pairs to compare a node against; nothing flagged "
                     "(3 nodes or more are needed)";
    return judgement;
  }
  std::vector<bool> flagged(size_t(n), false);
  for (int node = 0; node < n; ++node) {
    const double reference =
        median_of(measured(m, [node](int a, int b) { return a != node && b != node; }));
    if (reference <= 0) continue;
    const std::pair<const char*, std::function<bool(int, int)>> directions[] = {
        {"send", [node](int a, int) { return a == node; }},
        {"receive", [node](int, int b) { return b == node; }}};
    for (const auto& [name, mine] : directions) {
      const double median = upper_median_of(measured(m, mine));
      if (median < 0 || median >= flag_fraction * reference) continue;
      judgement.nodes.push_back(
          {node, name, median, reference, median < fail_fraction * reference});
      flagged[size_t(node)] = true;
    }
  }
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a == b || m[size_t(a)][size_t(b)] < 0 || flagged[size_t(a)] || flagged[size_t(b)])
        continue;
      // The pairs of neither node; at 3 nodes there are none, so the pairs other than this one.
      std::vector<double> others =
          measured(m, [a, b](int x, int y) { return x != a && x != b && y != a && y != b; });
      if (others.empty())
        others = measured(m, [a, b](int x, int y) { return !(x == a && y == b); });
      const double reference = median_of(others);
      const double gbps = m[size_t(a)][size_t(b)];
      if (reference > 0 && gbps < flag_fraction * reference)
        judgement.links.push_back({a, b, gbps, reference, gbps < fail_fraction * reference});
    }
  return judgement;
}

PairSpread spread_of(const PairMatrix& m, const std::vector<bool>& suspected) {
  const auto healthy = [&suspected](int a, int b) {
    return !(size_t(a) < suspected.size() && suspected[size_t(a)]) &&
           !(size_t(b) < suspected.size() && suspected[size_t(b)]);
  };
  const std::vector<double> values = measured(m, healthy);
  PairSpread spread;
  spread.pairs = int(values.size());
  if (values.empty()) return spread;
  spread.median_gbps = median_of(values);
  std::vector<double> deviations;
  for (double v : values) deviations.push_back(std::fabs(v - spread.median_gbps));
  spread.mad_gbps = median_of(deviations);
  return spread;
}

Confirmed confirm(double suspect_gbps, double control_gbps, double noise, const PairLines& lines) {
  if (!(control_gbps > 0)) return Confirmed::transient;
  const double ratio = suspect_gbps / control_gbps;
  if (ratio < lines.fail_line(noise)) return Confirmed::failed;
  if (ratio < lines.flag_fraction - noise) return Confirmed::flagged;
  return Confirmed::transient;
}

const char* confirmed_name(Confirmed outcome) {
  switch (outcome) {
    case Confirmed::flagged:
      return "flag";
    case Confirmed::failed:
      return "fail";
    case Confirmed::transient:
      break;
  }
  return "transient";
}

std::string rate_text(double gbps) {
  // Three significant digits in fixed notation, in the unit that keeps the figure at 1 or above.
  const bool giga = gbps >= 0.9995;
  const double value = giga ? gbps : gbps * 1e3;
  const int decimals = value >= 99.95 ? 0 : value >= 9.995 ? 1 : value >= 0.9995 ? 2 : 3;
  char text[48];
  std::snprintf(text, sizeof text, "%.*f %s", decimals, value, giga ? "GB/s" : "MB/s");
  return text;
}

}  // namespace tp
