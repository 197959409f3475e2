#include "app/report/pair_matrix_text.h"

#include <algorithm>
#include <set>

#include "common/printf_text.h"

namespace tp {
namespace {

using nlohmann::json;

std::vector<std::string> names_of(const json& hosts) {
  std::vector<std::string> names;
  for (const json& h : hosts) names.push_back(h.get<std::string>());
  return names;
}

struct Pair {
  double gbps;
  size_t from, to;
};

std::vector<Pair> measured_pairs(const json& m) {
  std::vector<Pair> pairs;
  for (size_t i = 0; i < m.size(); ++i)
    for (size_t j = 0; j < m[i].size(); ++j)
      if (m[i][j].is_number()) pairs.push_back({m[i][j].get<double>(), i, j});
  return pairs;
}

// GB/s with three decimals, so a 12 MB/s path stays visible (0.012).
std::string full_matrix(const std::vector<std::string>& names, const json& m,
                        const std::string& title) {
  const int width = int(distinct_width(names, 12));
  std::string out = "\n" + title + ", GB/s (row sends to column):\n" +
                    printf_text("  %-*s", std::max(width, 20), "");
  for (const std::string& h : names) out += printf_text(" %*.*s", width, width, h.c_str());
  out += "\n";
  for (size_t i = 0; i < names.size(); ++i) {
    out += printf_text("  %-*.*s", std::max(width, 20), width, names[i].c_str());
    for (const json& cell : m[i])
      out += cell.is_null() ? printf_text(" %*s", width, "-")
                            : printf_text(" %*.3f", width, cell.get<double>());
    out += "\n";
  }
  return out;
}

std::string slowest_pairs(const std::vector<std::string>& names, const json& m,
                          const std::string& title) {
  std::vector<Pair> pairs = measured_pairs(m);
  std::string out = printf_text("\n%s, %zu nodes (%zu pairs measured): ", title.c_str(),
                                names.size(), pairs.size());
  if (pairs.empty()) return out + "none measured\n";
  std::sort(pairs.begin(), pairs.end(),
            [](const Pair& a, const Pair& b) { return a.gbps < b.gbps; });
  const Pair& middle = pairs[pairs.size() / 2];
  out += printf_text(
      "median %.3f GB/s; the %zu slowest (`trainproof report plot` draws the whole matrix):\n",
      middle.gbps, std::min(kSlowestPairsListed, pairs.size()));
  const int width = int(distinct_width(names, 0));
  for (size_t k = 0; k < pairs.size() && k < kSlowestPairsListed; ++k)
    out += printf_text("  %-*s -> %-*s %10.3f GB/s\n", width, names[pairs[k].from].c_str(), width,
                       names[pairs[k].to].c_str(), pairs[k].gbps);
  return out;
}

}  // namespace

size_t distinct_width(const std::vector<std::string>& names, size_t at_least) {
  size_t longest = 0;
  for (const std::string& n : names) longest = std::max(longest, n.size());
  for (size_t width = std::max<size_t>(1, std::min(at_least, longest)); width < longest; ++width) {
    std::set<std::string> cut;
    for (const std::string& n : names) cut.insert(n.substr(0, width));
    if (cut.size() == std::set<std::string>(names.begin(), names.end()).size())
      return std::max(width, at_least);
  }
  return std::max(longest, at_least);
}

std::string slowest_pairs_text(const json& hosts, const json& summary, const std::string& title,
                               const json& in_trace) {
  const json slowest = summary.value("slowest", json::array());
  const json median = summary.value("median_gbps", json());
  std::string out =
      printf_text("\n%s, %zu nodes (%llu pairs measured): ", title.c_str(), hosts.size(),
                  static_cast<unsigned long long>(summary.value("pairs", 0ull)));
  if (!median.is_number() || slowest.empty()) return out + "none measured\n";
  out += printf_text("median %.3f GB/s; the %zu slowest (the whole matrix is in the trace%s%s):\n",
                     median.get<double>(), std::min(kSlowestPairsListed, slowest.size()),
                     in_trace.is_string() ? ", " : "",
                     in_trace.is_string() ? in_trace.get<std::string>().c_str() : "");
  std::vector<std::string> names;
  for (const json& p : slowest)
    for (const char* end : {"from", "to"}) names.push_back(p.value(end, std::string()));
  const int width = int(distinct_width(names, 0));
  for (size_t k = 0; k < slowest.size() && k < kSlowestPairsListed; ++k)
    out += printf_text(
        "  %-*s -> %-*s %10.3f GB/s\n", width, slowest[k].value("from", std::string()).c_str(),
        width, slowest[k].value("to", std::string()).c_str(), slowest[k].value("gbps", 0.0));
  return out;
}

std::string pair_matrix_text(const json& hosts, const json& matrix, const std::string& title) {
  const std::vector<std::string> names = names_of(hosts);
  return names.size() <= kNodesInFullMatrix ? full_matrix(names, matrix, title)
                                            : slowest_pairs(names, matrix, title);
}

}  // namespace tp
