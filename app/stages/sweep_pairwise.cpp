#include "app/stages/sweep_pairwise.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "app/stages/stage_watch.h"
#include "common/stats.h"
#include "fabric/pairwise.h"
#include "fabric/sysfs_topology.h"
#include "fabric/tournament.h"
#include "mpi/check.h"
#include "mpi/gather.h"
#include "train/preemption.h"

namespace tp {
namespace {

using nlohmann::json;

// Every rail's members, the same on every rank: rail k is the k-th rank of each host.
std::vector<PairwiseRail> rails_of(const World& world, const std::string& pair_ranks) {
  std::map<int, PairwiseRail> rails;
  std::map<std::string, int> seen;
  for (int r = 0; r < world.size; ++r) {
    const std::string& host = world.host_of_rank[size_t(r)];
    const int k = seen[host]++;
    if (pair_ranks == "node" && k > 0) continue;
    PairwiseRail& rail = rails[k];
    rail.rail = k;
    rail.hosts.push_back(host);
    rail.world_ranks.push_back(r);
  }
  std::vector<PairwiseRail> out;
  for (auto& [k, rail] : rails) {
    const size_t n = rail.hosts.size();
    rail.one_way = rail.both_ways = PairMatrix(n, std::vector<double>(n, -1.0));
    out.push_back(std::move(rail));
  }
  return out;
}

// Round r of every rail at once: the rails' ranks are disjoint, so their pairs are too.
std::vector<std::vector<RankPair>> tournament(const std::vector<PairwiseRail>& rails) {
  std::vector<std::vector<RankPair>> rounds;
  for (const PairwiseRail& rail : rails) {
    const auto schedule = round_robin(int(rail.world_ranks.size()));
    if (rounds.size() < schedule.size()) rounds.resize(schedule.size());
    for (size_t r = 0; r < schedule.size(); ++r)
      for (const NodePair& p : schedule[r])
        rounds[r].emplace_back(rail.world_ranks[size_t(p.first)],
                               rail.world_ranks[size_t(p.second)]);
  }
  return rounds;
}

json transfer_json(const PairTransfer& t) {
  return {t.from, t.to, t.mode == PairMode::both_ways, t.seconds, t.bytes, t.wrong};
}

// Every rank's received transfers, at rank 0.
std::vector<PairTransfer> gather_transfers(const World& world,
                                           const std::vector<PairTransfer>& mine) {
  json list = json::array();
  for (const PairTransfer& t : mine) list.push_back(transfer_json(t));
  std::vector<PairTransfer> all;
  for (const json& rank_list : gather_records_at_root(world, list))
    for (const json& j : rank_list)
      all.push_back({j[0], j[1], j[2].get<bool>() ? PairMode::both_ways : PairMode::one_way, j[3],
                     j[4], j[5]});
  return all;
}

// Where each measuring world rank sits: its rail and its index among the rail's nodes. Built once
// per pass: a pass over n nodes brings about 4n^2 transfers to place.
using Place = std::pair<PairwiseRail*, int>;
std::map<int, Place> places_of(std::vector<PairwiseRail>& rails) {
  std::map<int, Place> places;
  for (PairwiseRail& rail : rails)
    for (size_t i = 0; i < rail.world_ranks.size(); ++i)
      places[rail.world_ranks[i]] = {&rail, int(i)};
  return places;
}

Place place_in(const std::map<int, Place>& places, int rank) {
  const auto it = places.find(rank);
  return it == places.end() ? Place{nullptr, -1} : it->second;
}

void note_wrong(PairwiseRecord& record, const PairwiseRail& rail, int from, int to,
                const PairTransfer& t) {
  record.wrong += t.wrong;
  if (t.wrong == 0 || !record.first_wrong.empty()) return;
  record.first_wrong = rail.hosts[size_t(from)] + " -> " + rail.hosts[size_t(to)] +
                       (t.mode == PairMode::one_way ? " (one way)" : " (both ways)") + ": " +
                       std::to_string(t.wrong) + " wrong element(s) received by rank " +
                       std::to_string(t.to);
}

void fill_matrices(PairwiseRecord& record, const std::vector<PairTransfer>& all) {
  const auto places = places_of(record.rails);
  for (const PairTransfer& t : all) {
    auto [rail, to] = place_in(places, t.to);
    const int from = place_in(places, t.from).second;
    if (!rail || from < 0) continue;
    PairMatrix& m = t.mode == PairMode::one_way ? rail->one_way : rail->both_ways;
    m[size_t(from)][size_t(to)] = t.gbps();
    note_wrong(record, *rail, from, to, t);
  }
}

// The node of the rail with the highest median one-way bandwidth among those not flagged.
int best_node(const PairwiseRail& rail, const std::vector<bool>& flagged) {
  int best = -1;
  double best_gbps = -1;
  for (size_t i = 0; i < rail.hosts.size(); ++i) {
    if (flagged[i]) continue;
    std::vector<double> mine;
    for (size_t j = 0; j < rail.hosts.size(); ++j)
      if (i != j) mine.insert(mine.end(), {rail.one_way[i][j], rail.one_way[j][i]});
    if (const double m = median(mine); m > best_gbps) best_gbps = m, best = int(i);
  }
  return best;
}

// Each flagged node against the best node of its rail, one pair at a time (the rest wait), so
// nothing else shares the fabric while it is measured again.
std::vector<std::vector<RankPair>> second_pass_schedule(std::vector<PairwiseRail>& rails) {
  std::vector<std::vector<RankPair>> rounds;
  for (PairwiseRail& rail : rails) {
    std::vector<bool> flagged(rail.hosts.size(), false);
    for (const auto* judged : {&rail.judged_one_way, &rail.judged_both_ways})
      for (const NodeFlag& f : judged->nodes) flagged[size_t(f.node)] = true;
    const int best = best_node(rail, flagged);
    if (best < 0) continue;
    for (size_t i = 0; i < flagged.size(); ++i) {
      if (!flagged[i]) continue;
      rail.second_pass.push_back({int(i), best, 0, 0, 0, 0});
      rounds.push_back({{rail.world_ranks[i], rail.world_ranks[size_t(best)]}});
    }
  }
  return rounds;
}

void record_second_pass(std::vector<PairwiseRail>& rails, const std::vector<PairTransfer>& all) {
  const auto places = places_of(rails);
  for (const PairTransfer& t : all) {
    auto [rail, to] = place_in(places, t.to);
    const int from = place_in(places, t.from).second;
    if (!rail) continue;
    for (PairRecheck& r : rail->second_pass) {
      const bool sent = from == r.node && to == r.against;
      const bool got = from == r.against && to == r.node;
      const bool one = t.mode == PairMode::one_way;
      if (sent) (one ? r.send_gbps : r.both_send_gbps) = t.gbps();
      if (got) (one ? r.receive_gbps : r.both_receive_gbps) = t.gbps();
    }
  }
}

std::string schedule_text(const std::vector<std::vector<RankPair>>& rounds) {
  json j = json::array();
  for (const auto& round : rounds) {
    json pairs = json::array();
    for (const RankPair& p : round) pairs.push_back({p.first, p.second});
    j.push_back(pairs);
  }
  return j.dump();
}

std::vector<std::vector<RankPair>> schedule_from(const std::string& text) {
  std::vector<std::vector<RankPair>> rounds;
  for (const json& round : json::parse(text)) {
    rounds.emplace_back();
    for (const json& p : round) rounds.back().emplace_back(p[0], p[1]);
  }
  return rounds;
}

// Each node's ports whose error counters grew between `before` and now, at rank 0.
std::map<std::string, std::vector<std::string>> grown_counters(
    const World& world, const std::vector<IbErrorCounters>& before, const std::string& sysfs_root) {
  json mine;  // null: nothing grew here, or not this node's first rank
  if (world.index_on_host() == 0) {
    const auto grown = grown_error_counters(before, read_ib_error_counters(sysfs_root));
    if (!grown.empty()) mine = {{"host", world.host}, {"grown", grown}};
  }
  std::map<std::string, std::vector<std::string>> out;
  for (const json& j : gather_records_at_root(world, mine)) {
    if (j.is_null()) continue;
    for (const json& g : j.at("grown"))
      out[j.at("host")].push_back("InfiniBand " + g.get<std::string>());
  }
  return out;
}

}  // namespace

PairwiseRecord run_pairwise(const SweepConfig& cfg, const World& world, Collective& collective,
                            const std::string& sysfs_root) {
  const std::vector<IbErrorCounters> counters_before = world.index_on_host() == 0
                                                           ? read_ib_error_counters(sysfs_root)
                                                           : std::vector<IbErrorCounters>{};
  PairwiseRecord record;
  record.pair_bytes = cfg.pair_bytes;
  record.pair_iters = cfg.pair_iters;
  record.rails = rails_of(world, cfg.pair_ranks);
  const PairPlan plan{cfg.pair_bytes, cfg.pair_iters, 1, cfg.plan.corrupt_rank};
  const auto rounds = tournament(record.rails);
  if (world.rank == 0)
    spdlog::info("pairwise: {} rail(s), {} round(s) of {} bytes x {} per pair and direction",
                 record.rails.size(), rounds.size(), cfg.pair_bytes, cfg.pair_iters);
  // Rounds of large transfers over a slow link take minutes: say where the pass is.
  const auto progress = [&world](size_t done, size_t total) {
    if (world.rank == 0) spdlog::info("pairwise: round {}/{} measured", done, total);
    stage_beat(int64_t(done));
    stop_point(world.comm);
  };
  const auto first =
      gather_transfers(world, measure_rounds(collective, world.comm, rounds, plan, progress));
  std::string second_text;
  if (world.rank == 0) {
    fill_matrices(record, first);
    for (PairwiseRail& rail : record.rails) {
      rail.judged_one_way = judge_pairs(rail.one_way, cfg.flag_fraction, cfg.fail_fraction);
      rail.judged_both_ways = judge_pairs(rail.both_ways, cfg.flag_fraction, cfg.fail_fraction);
    }
    second_text = schedule_text(second_pass_schedule(record.rails));
  }
  const auto second = schedule_from(broadcast_from_root(world, second_text));
  if (world.rank == 0 && !second.empty())
    spdlog::info("pairwise: {} flagged node(s) measured again against the best node",
                 second.size());
  const auto again = gather_transfers(
      world,
      measure_rounds(collective, world.comm, second, plan, [&world, &rounds](size_t done, size_t) {
        stage_beat(int64_t(rounds.size() + done));
        stop_point(world.comm);
      }));
  if (world.rank == 0) record_second_pass(record.rails, again);
  record.counter_reasons = grown_counters(world, counters_before, sysfs_root);
  return record;
}

}  // namespace tp
