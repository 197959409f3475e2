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

// Medians of the matrix's measured pairs with one or two nodes' pairs (or one pair) left out,
// each in O(log^2) after an O(pairs log pairs) sort, so judging every pair of 512 nodes is
// seconds, not the hours a fresh sort per pair took. The k-th smallest of what is left is the
// smallest measured value v with (values <= v) - (left-out values <= v) > k.
class MedianWithout {
 public:
  explicit MedianWithout(const PairMatrix& m) : m_(m), of_node_(m.size()) {
    for (size_t a = 0; a < m.size(); ++a)
      for (size_t b = 0; b < m[a].size(); ++b)
        if (a != b && m[a][b] >= 0) {
          all_.push_back(m[a][b]);
          of_node_[a].push_back(m[a][b]);
          if (b < of_node_.size()) of_node_[b].push_back(m[a][b]);
        }
    std::sort(all_.begin(), all_.end());
    for (auto& values : of_node_) std::sort(values.begin(), values.end());
  }
  // The median of the pairs that include neither `a` nor `b` (-1 for none); -1 when none is left.
  double without_nodes(int a, int b) const {
    return median(
        [&](double v) {
          size_t out = at_most(of_node_[size_t(a)], v);
          if (b >= 0) {
            out += at_most(of_node_[size_t(b)], v);
            // The pairs between a and b are in both lists.
            for (double shared : {pair(a, b), pair(b, a)})
              out -= shared >= 0 && shared <= v ? 1 : 0;
          }
          return out;
        },
        left(a, b));
  }
  // A ceiling over the median of any subset that leaves out at most `left_out` pairs: a subset's
  // k-th smallest is at most the whole's (k + left_out)-th, and its median is at most its
  // (pairs / 2)-th. -1 when there are no pairs.
  double ceiling_of_median_without(size_t left_out) const {
    if (all_.empty()) return -1;
    return all_[std::min(all_.size() - 1, all_.size() / 2 + left_out)];
  }
  // The median of every pair but (a, b).
  double without_pair(int a, int b) const {
    const double gone = pair(a, b);
    return median([&](double v) { return size_t(gone >= 0 && gone <= v ? 1 : 0); },
                  all_.size() - (gone >= 0 ? 1 : 0));
  }

 private:
  static size_t at_most(const std::vector<double>& sorted, double v) {
    return size_t(std::upper_bound(sorted.begin(), sorted.end(), v) - sorted.begin());
  }
  double pair(int a, int b) const {
    return b >= 0 && size_t(b) < m_[size_t(a)].size() && a != b ? m_[size_t(a)][size_t(b)] : -1;
  }
  // How many measured pairs include neither a nor b.
  size_t left(int a, int b) const {
    size_t out = of_node_[size_t(a)].size();
    if (b >= 0)
      out += of_node_[size_t(b)].size() - (pair(a, b) >= 0 ? 1 : 0) - (pair(b, a) >= 0 ? 1 : 0);
    return all_.size() - out;
  }
  template <class LeftOut>
  double kth(size_t k, const LeftOut& left_out_at_most) const {
    size_t low = 0, high = all_.size() - 1;
    while (low < high) {
      const size_t mid = (low + high) / 2;
      const double v = all_[mid];
      if (at_most(all_, v) - left_out_at_most(v) > k)
        high = mid;
      else
        low = mid + 1;
    }
    return all_[low];
  }
  // median_of's rule (the mean of the two middle values for an even count) over what is left.
  template <class LeftOut>
  double median(const LeftOut& left_out_at_most, size_t count) const {
    if (count == 0) return -1;
    const size_t mid = count / 2;
    return count % 2 ? kth(mid, left_out_at_most)
                     : (kth(mid - 1, left_out_at_most) + kth(mid, left_out_at_most)) / 2;
  }

  const PairMatrix& m_;
  std::vector<double> all_;
  std::vector<std::vector<double>> of_node_;  // every measured pair that includes the node
};

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
  const MedianWithout medians(m);
  std::vector<bool> flagged(size_t(n), false);
  for (int node = 0; node < n; ++node) {
    const double reference = medians.without_nodes(node, -1);
    if (reference <= 0) continue;
    std::vector<double> sends, receives;
    for (int other = 0; other < n; ++other) {
      if (other == node) continue;
      if (m[size_t(node)][size_t(other)] >= 0) sends.push_back(m[size_t(node)][size_t(other)]);
      if (m[size_t(other)][size_t(node)] >= 0) receives.push_back(m[size_t(other)][size_t(node)]);
    }
    for (const auto& [name, values] :
         {std::pair{"send", &sends}, std::pair{"receive", &receives}}) {
      const double median = upper_median_of(*values);
      if (median < 0 || median >= flag_fraction * reference) continue;
      judgement.nodes.push_back(
          {node, name, median, reference, median < fail_fraction * reference});
      flagged[size_t(node)] = true;
    }
  }
  // A pair at or above the line drawn over every possible reference cannot be a link flag, so its
  // own median is never worked out: on a healthy fabric, almost every pair.
  const double ceiling = medians.ceiling_of_median_without(4 * size_t(n - 1));
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a == b || m[size_t(a)][size_t(b)] < 0 || flagged[size_t(a)] || flagged[size_t(b)])
        continue;
      if (ceiling > 0 && m[size_t(a)][size_t(b)] >= flag_fraction * ceiling) continue;
      // The pairs of neither node; at 3 nodes there are none, so the pairs other than this one.
      double reference = medians.without_nodes(a, b);
      if (reference < 0) reference = medians.without_pair(a, b);
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
