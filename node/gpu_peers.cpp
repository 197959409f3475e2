#include "node/gpu_peers.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace tp {
namespace {

double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + long(mid), values.end());
  const double upper = values[mid];
  if (values.size() % 2) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + long(mid));
  return (lower + upper) / 2;
}

std::string number_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, value >= 100 ? "%.0f" : value >= 10 ? "%.1f" : "%.2f", value);
  return text;
}

std::string percent_text(double fraction) {
  char text[16];
  std::snprintf(text, sizeof text, "%.0f%%", 100 * fraction);
  return text;
}

}  // namespace

PeerJudgement judge_gpu_peers(const std::vector<GpuFigure>& figures, const PeerRules& rules,
                              const std::string& what, const std::string& unit) {
  PeerJudgement j;
  if (figures.empty()) return j;
  std::vector<double> values;
  std::map<std::string, double> best_of_node;
  for (const GpuFigure& f : figures) {
    values.push_back(f.value);
    double& best = best_of_node[f.host];
    best = std::max(best, f.value);
  }
  j.median = median_of(values);
  std::vector<double> deviations;
  for (double v : values) deviations.push_back(std::fabs(v - j.median));
  j.noise = j.median > 0 ? median_of(deviations) / j.median : 0;
  for (size_t i = 0; i < figures.size(); ++i) {
    const GpuFigure& f = figures[i];
    const double node_best = best_of_node[f.host];
    // The lower of the two ratios decides: a GPU slow beside its node's best, or slow beside
    // the job while its whole node is (a node whose GPUs all run slow has no faster peer).
    const bool by_node =
        node_best > 0 && f.value / node_best <= (j.median > 0 ? f.value / j.median : 1);
    const double reference = by_node ? node_best : j.median;
    if (!(reference > 0)) continue;
    const double ratio = f.value / reference;
    const bool below_floor = rules.floor > 0 && f.value < rules.floor;
    const char* status = below_floor || ratio < rules.fail_fraction - j.noise ? "fail"
                         : ratio < rules.warn_fraction - j.noise              ? "warn"
                                                                              : nullptr;
    if (!status) continue;
    PeerFlag flag{
        i, status, ratio, reference, by_node ? "the best GPU of its node" : "the job's median GPU",
        ""};
    flag.reason = f.host + ": " + (f.gpu < 0 ? "the CPU" : "GPU " + std::to_string(f.gpu)) +
                  (f.uuid.empty() ? "" : " (" + f.uuid + ")") + ": " + what + " " +
                  number_text(f.value) + " " + unit + ", " + percent_text(ratio) + " of " +
                  flag.reference_name + " (" + number_text(reference) + " " + unit +
                  "; the GPUs spread by " + percent_text(j.noise) + ")";
    if (below_floor)
      flag.reason += "; below the host file's floor of " + number_text(rules.floor) + " " + unit;
    j.flags.push_back(std::move(flag));
  }
  return j;
}

}  // namespace tp
