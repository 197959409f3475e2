#include "app/stages/sweep_pairwise_report.h"

#include <algorithm>
#include <cstdio>

#include "app/report/gate.h"
#include "app/stages/pair_matrix_json.h"
#include "common/number_text.h"

namespace tp {
namespace {

using nlohmann::json;

const char* mode_text(PairMode mode) {
  return mode == PairMode::one_way ? "one direction at a time" : "both directions at once";
}

std::string percent_text(double fraction) {
  char text[16];
  std::snprintf(text, sizeof text, fraction < 0.1 ? "%.1f%%" : "%.0f%%", 100 * fraction);
  return text;
}

const std::string& host(const PairwiseRail& rail, int node) {
  return rail.hosts[size_t(node)];
}

// "vc-n3", or on a node with several rails "vc-n3 rail 1 (mlx5_1)": what to reseat or replace.
std::string where(const PairwiseRecord& record, const PairwiseRail& rail, int node) {
  std::string text = host(rail, node);
  if (record.rails.size() > 1) text += " rail " + std::to_string(rail.rail);
  if (size_t(node) < rail.nics.size() && !rail.nics[size_t(node)].empty())
    text += " (" + rail.nics[size_t(node)] + ")";
  return text;
}

// "measured again at 0.12 GB/s, 6.0% of the control vc-n1 -> vc-n2 at 2 GB/s (10 alternated
// transfers each, noise 4%)"
std::string measured_again(const PairwiseRail& rail, const PairConfirmation& c) {
  std::string text = "measured again at " + rate_text(c.gbps);
  if (c.control_from >= 0 && c.control_gbps > 0)
    text += ", " + percent_text(c.gbps / c.control_gbps) + " of the control " +
            host(rail, c.control_from) + " -> " + host(rail, c.control_to) + " at " +
            rate_text(c.control_gbps);
  text += " (" + std::to_string(c.transfers) + " alternated transfers each, noise " +
          percent_text(c.noise) + ")";
  if (c.again_gbps >= 0 && c.again_control_gbps > 0)
    text += ", and a second time at " + rate_text(c.again_gbps) + ", " +
            percent_text(c.again_gbps / c.again_control_gbps) + " of the control's " +
            rate_text(c.again_control_gbps);
  return text;
}

std::string caps_text(const PairwiseRecord& record) {
  return "sweep.confirm_max=" + std::to_string(record.confirm_max) +
         " trials, sweep.confirm_share=" + readable_number(record.confirm_share) +
         " of the first pass's " + readable_number(record.first_pass_seconds) + " s";
}

// A suspect with an outcome of its own: measured again, or judged by gate.min_pair_gbps.
bool unflagged_suspect(const PairConfirmation& c) {
  return c.kind != "pair" && !c.capped && (c.outcome == Confirmed::transient || c.gbps < 0);
}

std::string first_pass(const PairConfirmation& c) {
  const std::string of = c.kind == "node" ? "the fabric median" : "the median of the other pairs";
  return "first pass " + rate_text(c.first_gbps) + ", " +
         percent_text(c.first_gbps / c.first_reference_gbps) + " of " + of + " " +
         rate_text(c.first_reference_gbps);
}

std::string suspect_name(const PairwiseRecord& record, const PairwiseRail& rail,
                         const PairConfirmation& c) {
  if (c.kind == "node") return where(record, rail, c.node) + ": " + c.direction + " direction";
  return "link " + where(record, rail, c.from) + " -> " + where(record, rail, c.to);
}

// A failure the noise rule alone would not have made: its trial lies below the floor.
bool failed_by_floor(const PairwiseRecord& record, const PairConfirmation& c) {
  return c.outcome == Confirmed::failed && c.control_gbps > 0 &&
         c.gbps / c.control_gbps >= record.lines.fail_fraction - c.noise;
}

// A confirmed flag's reason: the figures it rests on, the confirmation's first.
std::string flag_reason(const PairwiseRecord& record, const PairwiseRail& rail,
                        const PairConfirmation& c) {
  std::string text =
      suspect_name(record, rail, c) + " " + measured_again(rail, c) + "; " + first_pass(c);
  if (failed_by_floor(record, c))
    text += "; below sweep.fail_floor (" + percent_text(record.lines.fail_floor) +
            " of its control) whatever the noise";
  if (c.kind == "link") text += "; both nodes are otherwise fine";
  return text + " (" + mode_text(c.mode) + ")";
}

// A suspect the caps left unconfirmed: its first-pass figures, and which cap.
std::string capped_text(const PairwiseRecord& record, const PairwiseRail& rail,
                        const PairConfirmation& c) {
  return "pairwise: " + suspect_name(record, rail, c) + " (" + mode_text(c.mode) +
         "): " + first_pass(c) + "; not measured again: the trials' cap was spent (" +
         caps_text(record) + "), so it is neither confirmed nor cleared";
}

std::string transient_text(const PairwiseRecord& record, const PairwiseRail& rail,
                           const PairConfirmation& c) {
  return "pairwise: " + suspect_name(record, rail, c) + " (" + mode_text(c.mode) +
         "): " + first_pass(c) + ", but " + measured_again(rail, c) + ": transient, not flagged";
}

// Why a trial's noise makes its measurement unreliable, naming the suspect, the control and where
// the noise came from.
std::string unreliable_text(const PairwiseRecord& record, const PairwiseRail& rail,
                            const PairConfirmation& c) {
  const double noise = std::max(c.noise, c.again_noise);
  const PairSpread& healthy =
      c.mode == PairMode::one_way ? rail.spread_one_way : rail.spread_both_ways;
  std::string control = "no control";
  if (c.control_from >= 0)
    control = "the control " + host(rail, c.control_from) + " -> " + host(rail, c.control_to);
  return suspect_name(record, rail, c) + " (" + mode_text(c.mode) +
         "): the measurement is unreliable: noise " + percent_text(noise) + " (the healthy " +
         "pairs spread by " + percent_text(healthy.relative()) + ", the suspect's transfers by " +
         percent_text(c.spread) + ", those of " + control + " by " +
         percent_text(c.control_spread) + "), above the bound " +
         percent_text(record.lines.noise_bound()) +
         " (sweep.fail_fraction - sweep.fail_floor), so only a figure below sweep.fail_floor (" +
         percent_text(record.lines.fail_floor) +
         " of the control) can fail; measure again on quiet nodes or with more sweep.pair_iters";
}

bool is_flag(const PairConfirmation& c) {
  return c.kind != "pair" && c.outcome != Confirmed::transient && c.gbps >= 0;
}

// How far below its control a flag lies: the worst first.
double severity(const PairConfirmation& c) {
  return c.control_gbps > 0 ? c.gbps / c.control_gbps : 1.0;
}

struct Flag {
  const PairwiseRail* rail;
  const PairConfirmation* confirmation;
};

// Every confirmed flag of every rail, the worst first: failures before flags, then the lowest
// against its control.
std::vector<Flag> flags_of(const PairwiseRecord& record) {
  std::vector<Flag> flags;
  for (const PairwiseRail& rail : record.rails)
    for (const PairConfirmation& c : rail.confirmations)
      if (is_flag(c)) flags.push_back({&rail, &c});
  std::stable_sort(flags.begin(), flags.end(), [](const Flag& a, const Flag& b) {
    const bool a_fails = a.confirmation->outcome == Confirmed::failed;
    const bool b_fails = b.confirmation->outcome == Confirmed::failed;
    if (a_fails != b_fails) return a_fails;
    return severity(*a.confirmation) < severity(*b.confirmation);
  });
  return flags;
}

json spread_json(const PairSpread& s) {
  return {{"median_gbps", s.median_gbps < 0 ? json(nullptr) : json(s.median_gbps)},
          {"mad_gbps", s.mad_gbps},
          {"relative", s.relative()},
          {"pairs", s.pairs}};
}

json confirmation_json(const PairwiseRail& rail, const PairConfirmation& c) {
  const auto name = [&rail](int node) { return node < 0 ? json(nullptr) : json(host(rail, node)); };
  return {
      {"kind", c.kind},
      {"node", name(c.node)},
      {"direction", c.direction.empty() ? json(nullptr) : json(c.direction)},
      {"both_ways", c.mode == PairMode::both_ways},
      {"from", name(c.from)},
      {"to", name(c.to)},
      {"control_from", name(c.control_from)},
      {"control_to", name(c.control_to)},
      {"first_gbps", c.first_gbps},
      {"first_reference_gbps", c.first_reference_gbps},
      {"bytes", c.bytes},
      {"control_bytes", c.control_bytes},
      {"transfers", c.transfers},
      {"gbps", c.gbps < 0 ? json(nullptr) : json(c.gbps)},
      {"control_gbps", c.control_gbps < 0 ? json(nullptr) : json(c.control_gbps)},
      {"spread", c.spread},
      {"control_spread", c.control_spread},
      {"noise", c.noise},
      // The second trial's two medians (docs/sweep.md); null when it was not measured twice.
      {"again_gbps", c.again_gbps < 0 ? json(nullptr) : json(c.again_gbps)},
      {"again_control_gbps", c.again_control_gbps < 0 ? json(nullptr) : json(c.again_control_gbps)},
      {"again_noise", c.again_gbps < 0 ? json(nullptr) : json(c.again_noise)},
      {"unreliable", c.unreliable},
      // Left unmeasured by sweep.confirm_max or sweep.confirm_share: no confirmation at all, or no
      // second trial (the first decided alone).
      {"capped", c.capped},
      {"again_capped", c.again_capped},
      {"outcome", c.kind == "pair" ? "judged by gate.min_pair_gbps" : confirmed_name(c.outcome)}};
}

int unconfirmed_count(const PairwiseRecord& record) {
  int count = 0;
  for (const PairwiseRail& rail : record.rails)
    for (const PairConfirmation& c : rail.confirmations) count += c.capped ? 1 : 0;
  return count;
}

// The transfers that moved fewer bytes than sweep.pair_bytes, bounded by time: at most
// kReducedListed of them (a slow node of 512 has 2,044), the rest counted in reduced_more.
constexpr size_t kReducedListed = 256;

size_t reduced_count(const PairwiseRail& rail, uint64_t pair_bytes) {
  size_t count = 0;
  for (const auto* bytes : {&rail.one_way_bytes, &rail.both_ways_bytes})
    for (size_t a = 0; a < bytes->size(); ++a)
      for (size_t b = 0; b < (*bytes)[a].size(); ++b)
        count += a != b && (*bytes)[a][b] > 0 && (*bytes)[a][b] < pair_bytes ? 1 : 0;
  return count;
}

json reduced_json(const PairwiseRail& rail, uint64_t pair_bytes) {
  json out = json::array();
  for (const auto& [bytes, both] :
       {std::pair{&rail.one_way_bytes, false}, std::pair{&rail.both_ways_bytes, true}})
    for (size_t a = 0; a < bytes->size(); ++a)
      for (size_t b = 0; b < (*bytes)[a].size(); ++b)
        if (a != b && (*bytes)[a][b] > 0 && (*bytes)[a][b] < pair_bytes &&
            out.size() < kReducedListed)
          out.push_back({{"from", rail.hosts[a]},
                         {"to", rail.hosts[b]},
                         {"both_ways", both},
                         {"bytes", (*bytes)[a][b]}});
  return out;
}

// pairwise_noise: a WARN for every trial too noisy for the noise rule to judge, the noisiest first
// named; it never softens pairwise_flags, whose floor still fails what lies far below its control.
json noise_check(const PairwiseRecord& record) {
  int trials = 0, count = 0;
  double worst = -1;
  std::string first;
  for (const PairwiseRail& rail : record.rails)
    for (const PairConfirmation& c : rail.confirmations) {
      if (c.kind == "pair" || c.gbps < 0) continue;
      ++trials;
      if (!c.unreliable) continue;
      ++count;
      const double noise = std::max(c.noise, c.again_noise);
      if (noise > worst) worst = noise, first = unreliable_text(record, rail, c);
    }
  const std::string bound = percent_text(record.lines.noise_bound());
  return gate_check("pairwise_noise", count, 0,
                    count    ? "warn"
                    : trials ? "pass"
                             : "n/a",
                    count ? std::to_string(count) + " of " + std::to_string(trials) +
                                " trial(s) unreliable; the noisiest: " + first
                    : trials ? "no trial below the flag line had a noise above the bound " + bound
                             : "no suspect was measured again");
}

}  // namespace

json pairwise_json(const PairwiseRecord& record) {
  json rails = json::array();
  for (const PairwiseRail& rail : record.rails) {
    json confirmations = json::array(), links = json::array(), transient = json::array(),
         unconfirmed = json::array();
    for (const PairConfirmation& c : rail.confirmations) {
      confirmations.push_back(confirmation_json(rail, c));
      if (c.kind == "link" && is_flag(c)) links.push_back(flag_reason(record, rail, c));
      if (unflagged_suspect(c)) transient.push_back(transient_text(record, rail, c));
      if (c.capped) unconfirmed.push_back(capped_text(record, rail, c));
    }
    rails.push_back(
        {{"rail", rail.rail},
         {"hosts", rail.hosts},
         {"world_ranks", rail.world_ranks},
         {"nics", rail.nics},
         {"one_way_gbps", report_matrix(rail.one_way)},
         {"both_ways_gbps", report_matrix(rail.both_ways)},
         // Where the matrices are null, they are in the trace (pair_matrix_json.h).
         {"matrices_in_trace", rail.hosts.size() > kNodesInReportMatrix
                                   ? json("pairwise/rail" + std::to_string(rail.rail) + "/")
                                   : json()},
         {"one_way", matrix_summary(rail.one_way, rail.hosts)},
         {"both_ways", matrix_summary(rail.both_ways, rail.hosts)},
         {"reduced", reduced_json(rail, record.pair_bytes)},
         {"reduced_more", reduced_count(rail, record.pair_bytes) -
                              std::min(kReducedListed, reduced_count(rail, record.pair_bytes))},
         {"spread",
          {{"one_way", spread_json(rail.spread_one_way)},
           {"both_ways", spread_json(rail.spread_both_ways)}}},
         {"confirmations", confirmations},
         {"bad_links", links},
         {"transient", transient},
         {"unconfirmed", unconfirmed},
         {"note", rail.judged_one_way.note}});
  }
  return {{"pair_bytes", record.pair_bytes},
          {"pair_iters", record.pair_iters},
          {"lines",
           {{"flag_fraction", record.lines.flag_fraction},
            {"fail_fraction", record.lines.fail_fraction},
            {"fail_floor", record.lines.fail_floor},
            {"noise_bound", record.lines.noise_bound()}}},
          {"confirm_iters", record.confirm_iters},
          {"confirm_max", record.confirm_max},
          {"confirm_share", record.confirm_share},
          {"first_pass_seconds", record.first_pass_seconds},
          {"unconfirmed", unconfirmed_count(record)},
          {"seconds", record.seconds},
          {"confirm_seconds", record.confirm_seconds},
          {"rails", rails},
          {"wrong", record.wrong},
          {"first_wrong", record.first_wrong}};
}

std::vector<std::string> pairwise_warnings(const PairwiseRecord& record) {
  std::vector<std::string> notes;
  for (const PairwiseRail& rail : record.rails)
    for (const PairConfirmation& c : rail.confirmations)
      if (unflagged_suspect(c)) notes.push_back(transient_text(record, rail, c));
  for (const PairwiseRail& rail : record.rails)
    for (const PairConfirmation& c : rail.confirmations)
      if (c.capped) notes.push_back(capped_text(record, rail, c));
  for (const PairwiseRail& rail : record.rails)
    for (const PairConfirmation& c : rail.confirmations)
      if (c.unreliable) notes.push_back("pairwise: " + unreliable_text(record, rail, c));
  return notes;
}

// "rail 1 (mlx5_1) send 36 MB/s = 2.8% of control": a node flag's figures, without the host the
// drain line already names.
std::string flag_summary(const PairwiseRecord& record, const PairwiseRail& rail,
                         const PairConfirmation& c) {
  std::string text;
  if (record.rails.size() > 1) text += "rail " + std::to_string(rail.rail) + " ";
  if (size_t(c.node) < rail.nics.size() && !rail.nics[size_t(c.node)].empty())
    text += "(" + rail.nics[size_t(c.node)] + ") ";
  text += c.direction + " " + rate_text(c.gbps);
  if (c.control_gbps > 0) text += " = " + percent_text(c.gbps / c.control_gbps) + " of control";
  return text;
}

std::map<std::string, std::vector<json>> pairwise_node_findings(const PairwiseRecord& record) {
  std::map<std::string, std::vector<json>> findings;
  for (const auto& [host_name, reasons] : record.node_reasons)
    for (const std::string& why : reasons)
      findings[host_name].push_back(node_finding("pairwise_flags", why, "warn"));
  for (const Flag& f : flags_of(record)) {
    const PairConfirmation& c = *f.confirmation;
    if (c.kind != "node") continue;
    findings[host(*f.rail, c.node)].push_back(node_finding(
        "pairwise_flags", flag_reason(record, *f.rail, c),
        c.outcome == Confirmed::failed ? "fail" : "warn", flag_summary(record, *f.rail, c)));
  }
  return findings;
}

json pairwise_checks(const PairwiseRecord& record) {
  json checks = json::array();
  bool measured = false;
  for (const PairwiseRail& rail : record.rails) measured = measured || rail.hosts.size() > 1;
  const std::string none = "no pair measured: every rail has one node";
  checks.push_back(gate_check("pairwise_correctness", record.wrong, 0,
                              !measured           ? "n/a"
                              : record.wrong == 0 ? "pass"
                                                  : "fail",
                              !measured           ? none
                              : record.wrong == 0 ? "every element every pair sent arrived intact"
                                                  : record.first_wrong));
  const std::vector<Flag> flags = flags_of(record);
  int count = int(flags.size());
  bool fail = false;
  std::string first;
  for (const Flag& f : flags) {
    fail = fail || f.confirmation->outcome == Confirmed::failed;
    if (first.empty()) first = flag_reason(record, *f.rail, *f.confirmation);
  }
  for (const auto& [host_name, found] : record.node_reasons) {
    count += int(found.size());
    if (first.empty()) first = host_name + ": " + found.front();
  }
  std::string note;
  for (const PairwiseRail& rail : record.rails)
    if (note.empty()) note = rail.judged_one_way.note;
  if (!measured) note = none;
  const std::string lead = flags.empty() ? "; the first: " : "; the worst: ";
  std::string reason = count > 0      ? std::to_string(count) + " flag(s)" + lead + first
                       : note.empty() ? "no node or link confirmed below sweep.flag_fraction"
                                      : note;
  // A suspect the caps left unmeasured is neither a flag nor cleared: the check cannot pass.
  const int unconfirmed = unconfirmed_count(record);
  if (unconfirmed > 0)
    reason += "; " + std::to_string(unconfirmed) +
              " suspect(s) not measured again, the trials' cap spent (" + caps_text(record) +
              "): pairwise.rails[].unconfirmed";
  // Under 3 nodes there is no majority to judge a node against: the check judged nothing.
  const bool judged = count > 0 || note.empty();
  checks.push_back(gate_check("pairwise_flags", count, 0,
                              fail                   ? "fail"
                              : count || unconfirmed ? "warn"
                              : judged               ? "pass"
                                                     : "n/a",
                              reason));
  checks.push_back(noise_check(record));
  return checks;
}

}  // namespace tp
