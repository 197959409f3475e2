#include "app/stages/sweep_confirm.h"

#include <algorithm>
#include <cmath>

#include "common/stats.h"

namespace tp {
namespace {

// The nodes of the rail that are suspects in either mode.
std::vector<bool> suspected_nodes(const PairwiseRail& rail) {
  std::vector<bool> suspected(rail.hosts.size(), false);
  for (const auto* judged : {&rail.judged_one_way, &rail.judged_both_ways})
    for (const NodeFlag& f : judged->nodes) suspected[size_t(f.node)] = true;
  return suspected;
}

// Nodes other than `a` and `b`, unsuspected first, each group fastest first (the median of its
// one-way pairs, both directions).
std::vector<int> controls_for(const PairwiseRail& rail, const std::vector<bool>& suspected, int a,
                              int b) {
  std::vector<std::pair<double, int>> ranked;
  for (size_t i = 0; i < rail.hosts.size(); ++i) {
    if (int(i) == a || int(i) == b) continue;
    std::vector<double> mine;
    for (size_t j = 0; j < rail.hosts.size(); ++j)
      if (i != j) mine.insert(mine.end(), {rail.one_way[i][j], rail.one_way[j][i]});
    const double key = (suspected[i] ? 0.0 : 1e12) + median(mine);
    ranked.emplace_back(-key, int(i));
  }
  std::sort(ranked.begin(), ranked.end());
  std::vector<int> out;
  for (const auto& r : ranked) out.push_back(r.second);
  return out;
}

// The suspect moves as many bytes as its control, so neither pays more of a transfer's fixed
// costs; only a suspect more than twice as slow moves fewer, as in the first pass, and then about
// as long as the control (never fewer than the floor).
uint64_t suspect_bytes(const PairConfirmation& c, uint64_t share, uint64_t floor_bytes) {
  const double ratio =
      c.first_reference_gbps > 0 ? std::min(1.0, c.first_gbps / c.first_reference_gbps) : 1.0;
  if (ratio >= 0.5) return share;
  const uint64_t scaled = uint64_t(double(share) * ratio * 2) / 4 * 4;
  return std::min(share, std::max(std::min(floor_bytes, share), scaled));
}

// A confirmation's trial in world ranks.
PairTrial trial_of(const PairwiseRail& rail, const PairConfirmation& c) {
  PairTrial t;
  t.suspect = {rail.world_ranks[size_t(c.from)], rail.world_ranks[size_t(c.to)]};
  if (c.control_from >= 0)
    t.control = {rail.world_ranks[size_t(c.control_from)], rail.world_ranks[size_t(c.control_to)]};
  t.mode = c.mode;
  t.suspect_bytes = c.bytes;
  t.control_bytes = c.control_bytes;
  return t;
}

// Elements a trial's receiver found wrong, counted with the pass's, the first named.
void add_wrong(PairwiseRecord& record, const TrialTransfer& t) {
  if (t.transfer.wrong == 0) return;
  record.wrong += t.transfer.wrong;
  if (record.first_wrong.empty())
    record.first_wrong = "confirmation: " + std::to_string(t.transfer.wrong) +
                         " wrong element(s) received by rank " + std::to_string(t.transfer.to) +
                         " from rank " + std::to_string(t.transfer.from);
}

struct Planner {
  PairwiseRecord& record;
  uint64_t floor_bytes;

  void add(PairwiseRail& rail, PairConfirmation c) {
    // A quarter of sweep.pair_bytes: twice the transfers of the first pass, alternated with as
    // many of the control, cost a trial about one round of the pass. A transfer of a quarter is
    // still long enough to be timed by its bandwidth, not its latency (the probe is smaller).
    const uint64_t share = std::max(floor_bytes, record.pair_bytes / 4 / 4 * 4);
    c.bytes = suspect_bytes(c, share, floor_bytes);
    c.control_bytes = c.control_from >= 0 ? share : 0;
    c.transfers = record.confirm_iters;
    rail.confirmations.push_back(std::move(c));
  }

  // A node in a direction: against its rail's best unsuspected node, with the second best as the
  // control on the same side (same receiver for a sender, same sender for a receiver).
  void node(PairwiseRail& rail, const NodeFlag& f, PairMode mode,
            const std::vector<bool>& suspected) {
    const std::vector<int> others = controls_for(rail, suspected, f.node, -1);
    if (others.size() < 2) return;
    const int partner = others[0], control = others[1];
    PairConfirmation c;
    c.kind = "node";
    c.node = f.node;
    c.direction = f.direction;
    c.mode = mode;
    c.first_gbps = f.median_gbps;
    c.first_reference_gbps = f.reference_gbps;
    const bool sends = f.direction == "send";
    c.from = sends ? f.node : partner;
    c.to = sends ? partner : f.node;
    c.control_from = sends ? control : partner;
    c.control_to = sends ? partner : control;
    add(rail, c);
  }

  // A link (or a pair below gate.min_pair_gbps): the same receiver from the best other node.
  void link(PairwiseRail& rail, const std::string& kind, int from, int to, PairMode mode,
            double gbps, double reference, const std::vector<bool>& suspected) {
    PairConfirmation c;
    c.kind = kind;
    c.mode = mode;
    c.from = from;
    c.to = to;
    c.first_gbps = gbps;
    c.first_reference_gbps = reference;
    const std::vector<int> others = controls_for(rail, suspected, from, to);
    if (!others.empty()) c.control_from = others[0], c.control_to = to;
    add(rail, c);
  }
};

bool node_suspect_one_way(const PairwiseRail& rail, const NodeFlag& f) {
  for (const NodeFlag& g : rail.judged_one_way.nodes)
    if (g.node == f.node && g.direction == f.direction) return true;
  return false;
}

bool has_link(const PairwiseRail& rail, int from, int to) {
  for (const PairConfirmation& c : rail.confirmations)
    if (c.kind == "link" && c.mode == PairMode::one_way && c.from == from && c.to == to)
      return true;
  return false;
}

// How far the ratio of the two medians may stray by chance: the standard error of a median of K
// transfers is about 1.25 standard deviations over sqrt(K), and a standard deviation about 1.48
// median absolute deviations; the suspect's and the control's errors add in quadrature.
double median_error(const PairConfirmation& c) {
  if (c.transfers <= 0) return 0;
  const double per_median = 1.25 * 1.48 / std::sqrt(double(c.transfers));
  return per_median * std::hypot(c.spread, c.control_spread);
}

// Every flag and every fail is measured a second time, and the milder outcome decides. A trial's
// noise is the spread within it, so a cause that holds for the whole trial and for this pair alone
// is not in it: on a host whose cores the ranks share, a healthy link read 47% of its control with
// 3% spread in one trial (CI: 6 ranks on 2 cores, docs/sweep.md), and a healthy node 13% (its
// neighbour 14%, then 239% when measured again).
bool second_trial_needed(const PairConfirmation& c) {
  return c.kind != "pair" && c.outcome != Confirmed::transient && c.control_gbps > 0;
}

// A trial below the flag line whose noise is above the bound: the noise rule could not have
// failed it above the floor, so what decided it is the floor, not the noise (docs/sweep.md).
bool unreliable(double gbps, double control_gbps, double noise, const PairLines& lines) {
  return control_gbps > 0 && gbps >= 0 && noise > lines.noise_bound() &&
         gbps / control_gbps < lines.flag_fraction;
}

struct Located {
  PairwiseRail* rail;
  PairConfirmation* confirmation;
};

std::vector<Located> every_confirmation(PairwiseRecord& record) {
  std::vector<Located> all;
  for (PairwiseRail& rail : record.rails)
    for (PairConfirmation& c : rail.confirmations) all.push_back({&rail, &c});
  return all;
}

double first_ratio(const PairConfirmation& c) {
  return c.first_reference_gbps > 0 ? c.first_gbps / c.first_reference_gbps : 1.0;
}

// The confirmation whose trial (or second trial, `again`) is `index`; nullptr for none.
std::vector<PairConfirmation*> by_trial(PairwiseRecord& record, bool again) {
  std::vector<PairConfirmation*> index;
  for (const Located& l : every_confirmation(record)) {
    const int t = again ? l.confirmation->again_trial : l.confirmation->trial;
    if (t < 0) continue;
    if (size_t(t) >= index.size()) index.resize(size_t(t) + 1, nullptr);
    index[size_t(t)] = l.confirmation;
  }
  return index;
}

}  // namespace

size_t trials_left(const PairwiseRecord& record, size_t already) {
  const size_t most = record.confirm_share > 0 ? size_t(std::max(0, record.confirm_max)) : 0;
  return most > already ? most - already : 0;
}

size_t first_trials_allowed(const PairwiseRecord& record) {
  return (trials_left(record, 0) + 1) / 2;
}

std::vector<PairTrial> plan_confirmations(PairwiseRecord& record, uint64_t floor_bytes,
                                          size_t max_trials) {
  Planner planner{record, floor_bytes};
  for (PairwiseRail& rail : record.rails) {
    const std::vector<bool> suspected = suspected_nodes(rail);
    rail.spread_one_way = spread_of(rail.one_way, suspected);
    rail.spread_both_ways = spread_of(rail.both_ways, suspected);
    // A node slow both one way and both ways is measured one way only; both ways adds a suspect
    // only where one way was fine (a duplex fault).
    for (const NodeFlag& f : rail.judged_one_way.nodes)
      planner.node(rail, f, PairMode::one_way, suspected);
    for (const NodeFlag& f : rail.judged_both_ways.nodes)
      if (!node_suspect_one_way(rail, f)) planner.node(rail, f, PairMode::both_ways, suspected);
    for (const auto& [judged, mode] : {std::pair{&rail.judged_one_way, PairMode::one_way},
                                       std::pair{&rail.judged_both_ways, PairMode::both_ways}})
      for (const LinkFlag& l : judged->links)
        planner.link(rail, "link", l.from, l.to, mode, l.gbps, l.reference_gbps, suspected);
    if (record.min_pair_gbps <= 0) continue;
    for (size_t a = 0; a < rail.hosts.size(); ++a)
      for (size_t b = 0; b < rail.hosts.size(); ++b) {
        const double v = rail.one_way[a][b];
        if (a == b || v < 0 || v >= record.min_pair_gbps || suspected[a] || suspected[b] ||
            has_link(rail, int(a), int(b)))
          continue;
        planner.link(rail, "pair", int(a), int(b), PairMode::one_way, v, record.min_pair_gbps,
                     suspected);
      }
  }
  // The worst suspects first, so a cap leaves the mildest unconfirmed.
  std::vector<Located> order = every_confirmation(record);
  std::stable_sort(order.begin(), order.end(), [](const Located& a, const Located& b) {
    return first_ratio(*a.confirmation) < first_ratio(*b.confirmation);
  });
  std::vector<PairTrial> trials;
  for (const Located& l : order) {
    if (trials.size() >= max_trials) {
      l.confirmation->capped = true;
      continue;
    }
    l.confirmation->trial = int(trials.size());
    trials.push_back(trial_of(*l.rail, *l.confirmation));
  }
  return trials;
}

void record_confirmations(PairwiseRecord& record, const std::vector<TrialTransfer>& measured,
                          const PairLines& lines, size_t trials_run) {
  record.lines = lines;
  const std::vector<PairConfirmation*> in_order = by_trial(record, false);
  // Trials the time cap ended before they ran leave their suspects unconfirmed.
  for (size_t i = trials_run; i < in_order.size(); ++i)
    if (in_order[i]) in_order[i]->capped = true, in_order[i]->trial = -1;
  for (const TrialTransfer& t : measured) {
    if (t.trial < 0 || size_t(t.trial) >= in_order.size() || !in_order[size_t(t.trial)] ||
        size_t(t.trial) >= trials_run)
      continue;
    PairConfirmation& c = *in_order[size_t(t.trial)];
    const double relative = t.transfer.seconds > 0 ? t.mad_seconds / t.transfer.seconds : 0.0;
    (t.control ? c.control_gbps : c.gbps) = t.transfer.gbps();
    (t.control ? c.control_spread : c.spread) = relative;
    add_wrong(record, t);
  }
  for (PairwiseRail& rail : record.rails)
    for (PairConfirmation& c : rail.confirmations) {
      if (c.capped) continue;  // never measured again: no outcome of its own
      const PairSpread& healthy =
          c.mode == PairMode::one_way ? rail.spread_one_way : rail.spread_both_ways;
      c.noise = std::max(healthy.relative(), median_error(c));
      // A pair below gate.min_pair_gbps is that threshold's to judge (app/judge/gate_judge.cpp).
      c.outcome =
          c.kind == "pair" ? Confirmed::transient : confirm(c.gbps, c.control_gbps, c.noise, lines);
      c.unreliable = c.kind != "pair" && unreliable(c.gbps, c.control_gbps, c.noise, lines);
    }
}

std::vector<PairTrial> plan_second_trials(PairwiseRecord& record, size_t max_trials) {
  std::vector<Located> order;
  for (const Located& l : every_confirmation(record))
    if (second_trial_needed(*l.confirmation)) order.push_back(l);
  // Failures first, then the lowest against its control: a cap leaves the mildest flags standing
  // on one trial.
  std::stable_sort(order.begin(), order.end(), [](const Located& a, const Located& b) {
    const bool a_fails = a.confirmation->outcome == Confirmed::failed;
    const bool b_fails = b.confirmation->outcome == Confirmed::failed;
    if (a_fails != b_fails) return a_fails;
    return a.confirmation->gbps / a.confirmation->control_gbps <
           b.confirmation->gbps / b.confirmation->control_gbps;
  });
  std::vector<PairTrial> trials;
  for (const Located& l : order) {
    if (trials.size() >= max_trials) {
      l.confirmation->again_capped = true;
      continue;
    }
    l.confirmation->again_trial = int(trials.size());
    trials.push_back(trial_of(*l.rail, *l.confirmation));
  }
  return trials;
}

void record_second_trials(PairwiseRecord& record, const std::vector<TrialTransfer>& measured,
                          const PairLines& lines, size_t trials_run) {
  std::vector<std::pair<const PairwiseRail*, PairConfirmation*>> in_order;
  for (const Located& l : every_confirmation(record)) {
    const int t = l.confirmation->again_trial;
    if (t < 0) continue;
    if (size_t(t) >= in_order.size()) in_order.resize(size_t(t) + 1, {nullptr, nullptr});
    in_order[size_t(t)] = {l.rail, l.confirmation};
  }
  // Second trials the time cap ended before they ran: their first trial decides alone.
  for (size_t i = trials_run; i < in_order.size(); ++i)
    if (in_order[i].second) in_order[i].second->again_capped = true;
  in_order.resize(std::min(in_order.size(), trials_run));
  std::vector<double> control_spread(in_order.size(), 0.0), spread(in_order.size(), 0.0);
  for (const TrialTransfer& t : measured) {
    if (t.trial < 0 || size_t(t.trial) >= in_order.size() || !in_order[size_t(t.trial)].second)
      continue;
    PairConfirmation& c = *in_order[size_t(t.trial)].second;
    const double relative = t.transfer.seconds > 0 ? t.mad_seconds / t.transfer.seconds : 0.0;
    (t.control ? c.again_control_gbps : c.again_gbps) = t.transfer.gbps();
    (t.control ? control_spread : spread)[size_t(t.trial)] = relative;
    add_wrong(record, t);
  }
  for (size_t i = 0; i < in_order.size(); ++i) {
    const auto& [rail, c] = in_order[i];
    if (!c) continue;
    PairConfirmation second = *c;
    second.spread = spread[i];
    second.control_spread = control_spread[i];
    const PairSpread& healthy =
        c->mode == PairMode::one_way ? rail->spread_one_way : rail->spread_both_ways;
    c->again_noise = std::max(healthy.relative(), median_error(second));
    const Confirmed again = confirm(c->again_gbps, c->again_control_gbps, c->again_noise, lines);
    c->unreliable =
        c->unreliable || unreliable(c->again_gbps, c->again_control_gbps, c->again_noise, lines);
    // The milder of the two trials decides: a healthy pair caught twice is unlikely.
    if (again == Confirmed::transient || c->outcome == Confirmed::transient)
      c->outcome = Confirmed::transient;
    else if (again == Confirmed::flagged)
      c->outcome = Confirmed::flagged;
  }
}

}  // namespace tp
