#include "app/stages/sweep_pairwise_report.h"

#include <algorithm>
#include <cstdio>

#include "app/report/gate.h"

namespace tp {
namespace {

using nlohmann::json;

json matrix_json(const PairMatrix& m) {
  json rows = json::array();
  for (const auto& row : m) {
    json cells = json::array();
    for (double v : row) cells.push_back(v < 0 ? json(nullptr) : json(v));
    rows.push_back(cells);
  }
  return rows;
}

const char* const kOneWay = "one direction at a time";
const char* const kBothWays = "both directions at once";

// What the second pass says about a flagged node: slow against the best node too, or only in its
// pairs.
std::string second_pass_text(const PairwiseRail& rail, int node, const NodeFlag& flag) {
  for (const PairRecheck& r : rail.second_pass) {
    if (r.node != node) continue;
    const double again = flag.direction == "send" ? r.send_gbps : r.receive_gbps;
    const bool still_slow = again < flag.reference_gbps * 0.8;
    return "; measured again against " + rail.hosts[size_t(r.against)] +
           " (the best node): " + rate_text(again) +
           (still_slow ? ", still slow: the node itself is slow"
                       : ", normal: its pairs, not the node, are slow");
  }
  return "";
}

std::string rail_text(const PairwiseRecord& record, const PairwiseRail& rail) {
  return record.rails.size() > 1 ? " on rail " + std::to_string(rail.rail) : "";
}

bool flagged_one_way(const PairwiseRail& rail, const NodeFlag& flag) {
  for (const NodeFlag& f : rail.judged_one_way.nodes)
    if (f.node == flag.node && f.direction == flag.direction) return true;
  return false;
}

// Every flag once: a node slow in a direction both one way and both ways at once is named for the
// one-way measurement only (both ways adds a finding only when one way was fine: a duplex fault).
template <class Visit>
void each_flag(const PairwiseRecord& record, Visit visit) {
  for (const PairwiseRail& rail : record.rails)
    for (const auto& [judged, mode] :
         {std::pair{&rail.judged_one_way, kOneWay}, std::pair{&rail.judged_both_ways, kBothWays}}) {
      for (const NodeFlag& f : judged->nodes) {
        if (judged == &rail.judged_both_ways && flagged_one_way(rail, f)) continue;
        visit(rail, rail.hosts[size_t(f.node)],
              node_flag_reason(f, rail.hosts) + ", " + mode + rail_text(record, rail) +
                  second_pass_text(rail, f.node, f),
              f.fail);
      }
      for (const LinkFlag& l : judged->links)
        visit(rail, "",
              link_flag_reason(l, rail.hosts) + " (" + mode + rail_text(record, rail) + ")",
              l.fail);
    }
}

// How far apart the one-way bandwidths of pairs between unflagged nodes are (max over min): on a
// fabric whose pairs differ by half, a flag near sweep.flag_fraction may be noise.
double unflagged_spread(const PairwiseRail& rail) {
  std::vector<bool> flagged(rail.hosts.size(), false);
  for (const auto* judged : {&rail.judged_one_way, &rail.judged_both_ways})
    for (const NodeFlag& f : judged->nodes) flagged[size_t(f.node)] = true;
  double low = 0, high = 0;
  for (size_t a = 0; a < rail.hosts.size(); ++a)
    for (size_t b = 0; b < rail.hosts.size(); ++b) {
      const double v = rail.one_way[a][b];
      if (a == b || v <= 0 || flagged[a] || flagged[b]) continue;
      low = low == 0 ? v : std::min(low, v);
      high = std::max(high, v);
    }
  return low > 0 ? high / low : 1.0;
}

}  // namespace

json pairwise_json(const PairwiseRecord& record) {
  json rails = json::array();
  for (const PairwiseRail& rail : record.rails) {
    json second = json::array();
    for (const PairRecheck& r : rail.second_pass)
      second.push_back({{"node", rail.hosts[size_t(r.node)]},
                        {"against", rail.hosts[size_t(r.against)]},
                        {"send_gbps", r.send_gbps},
                        {"receive_gbps", r.receive_gbps},
                        {"both_send_gbps", r.both_send_gbps},
                        {"both_receive_gbps", r.both_receive_gbps}});
    json links = json::array();
    each_flag(record,
              [&](const PairwiseRail& at, const std::string& host, const std::string& why, bool) {
                if (&at == &rail && host.empty()) links.push_back(why);
              });
    rails.push_back({{"rail", rail.rail},
                     {"hosts", rail.hosts},
                     {"world_ranks", rail.world_ranks},
                     {"one_way_gbps", matrix_json(rail.one_way)},
                     {"both_ways_gbps", matrix_json(rail.both_ways)},
                     {"bad_links", links},
                     {"note", rail.judged_one_way.note},
                     {"second_pass", second}});
  }
  return {{"pair_bytes", record.pair_bytes},
          {"pair_iters", record.pair_iters},
          {"rails", rails},
          {"wrong", record.wrong},
          {"first_wrong", record.first_wrong}};
}

std::vector<std::string> pairwise_warnings(const PairwiseRecord& record) {
  std::vector<std::string> warnings;
  for (const PairwiseRail& rail : record.rails) {
    const double spread = unflagged_spread(rail);
    if (spread <= 1.5) continue;
    char text[400];
    std::snprintf(text, sizeof text,
                  "pairwise%s: the fastest pair of unflagged nodes is %.2gx the slowest: flags "
                  "near sweep.flag_fraction may be noise (more sweep.pair_bytes or "
                  "sweep.pair_iters, or a quieter fabric, narrow it)",
                  rail_text(record, rail).c_str(), spread);
    warnings.push_back(text);
  }
  return warnings;
}

std::map<std::string, std::vector<std::string>> pairwise_node_reasons(
    const PairwiseRecord& record) {
  std::map<std::string, std::vector<std::string>> reasons = record.counter_reasons;
  each_flag(record,
            [&](const PairwiseRail&, const std::string& host, const std::string& why, bool) {
              if (!host.empty()) reasons[host].push_back(why);
            });
  return reasons;
}

json pairwise_checks(const PairwiseRecord& record) {
  json checks = json::array();
  checks.push_back(gate_check(
      "pairwise_correctness", record.wrong, 0, record.wrong == 0 ? "pass" : "fail",
      record.wrong == 0 ? "every element every pair sent arrived intact" : record.first_wrong));
  int flags = 0;
  bool fail = false;
  std::string first;
  each_flag(record, [&](const PairwiseRail&, const std::string&, const std::string& why, bool f) {
    ++flags;
    fail = fail || f;
    if (first.empty()) first = why;
  });
  for (const auto& [host, grown] : record.counter_reasons) {
    flags += int(grown.size());
    if (first.empty()) first = host + ": " + grown.front();
  }
  std::string note;
  for (const PairwiseRail& rail : record.rails)
    if (note.empty()) note = rail.judged_one_way.note;
  const std::string reason = flags > 0 ? std::to_string(flags) + " flag(s); the first: " + first
                             : note.empty() ? "no node or link below sweep.flag_fraction"
                                            : note;
  // Under 3 nodes there is no majority to judge a node against: the check judged nothing.
  const bool judged = flags > 0 || note.empty();
  checks.push_back(gate_check("pairwise_flags", flags, 0,
                              fail     ? "fail"
                              : flags  ? "warn"
                              : judged ? "pass"
                                       : "n/a",
                              reason));
  return checks;
}

}  // namespace tp
