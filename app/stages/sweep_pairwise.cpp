#include "app/stages/sweep_pairwise.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "app/stages/stage_watch.h"
#include "app/stages/sweep_confirm.h"
#include "common/clock.h"
#include "common/stats.h"
#include "fabric/pair_trials.h"
#include "fabric/pairwise.h"
#include "fabric/rank_nic.h"
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
    rail.one_way_bytes = rail.both_ways_bytes =
        std::vector<std::vector<uint64_t>>(n, std::vector<uint64_t>(n, 0));
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
    const bool one = t.mode == PairMode::one_way;
    (one ? rail->one_way : rail->both_ways)[size_t(from)][size_t(to)] = t.gbps();
    (one ? rail->one_way_bytes : rail->both_ways_bytes)[size_t(from)][size_t(to)] = t.bytes;
    note_wrong(record, *rail, from, to, t);
  }
}

json trial_json(const PairTrial& t) {
  return {t.suspect.first,
          t.suspect.second,
          t.control.first,
          t.control.second,
          t.mode == PairMode::both_ways,
          t.suspect_bytes,
          t.control_bytes};
}

std::vector<PairTrial> trials_from(const std::string& text) {
  std::vector<PairTrial> trials;
  for (const json& j : json::parse(text)) {
    PairTrial t;
    t.suspect = {j[0], j[1]};
    t.control = {j[2], j[3]};
    t.mode = j[4].get<bool>() ? PairMode::both_ways : PairMode::one_way;
    t.suspect_bytes = j[5];
    t.control_bytes = j[6];
    trials.push_back(t);
  }
  return trials;
}

// Every receiver's trial transfers, at rank 0.
std::vector<TrialTransfer> gather_trials(const World& world,
                                         const std::vector<TrialTransfer>& mine) {
  json list = json::array();
  for (const TrialTransfer& t : mine)
    list.push_back({t.trial, t.control, transfer_json(t.transfer), t.mad_seconds, t.transfers});
  std::vector<TrialTransfer> all;
  for (const json& rank_list : gather_records_at_root(world, list))
    for (const json& j : rank_list) {
      const json& p = j[2];
      all.push_back(
          {j[0], j[1],
           PairTransfer{p[0], p[1], p[2].get<bool>() ? PairMode::both_ways : PairMode::one_way,
                        p[3], p[4], p[5], 0},
           j[3], j[4]});
    }
  return all;
}

// What each node itself showed during the pass, at rank 0: its InfiniBand ports whose error
// counters grew between `before` and now, and `loaded`, the PCIe links its first rank found below
// their speed while its transfers ran.
std::map<std::string, std::vector<std::string>> node_findings(
    const World& world, const std::vector<IbErrorCounters>& before, const std::string& sysfs_root,
    const std::vector<std::string>& loaded) {
  json mine;  // null: nothing found here, or not this node's first rank
  if (world.index_on_host() == 0) {
    json reasons = json::array();
    for (const auto& g : grown_error_counters(before, read_ib_error_counters(sysfs_root)))
      reasons.push_back("InfiniBand " + g);
    for (const auto& link : loaded) reasons.push_back(link);
    if (!reasons.empty()) mine = {{"host", world.host}, {"reasons", reasons}};
  }
  std::map<std::string, std::vector<std::string>> out;
  for (const json& j : gather_records_at_root(world, mine)) {
    if (j.is_null()) continue;
    for (const json& why : j.at("reasons")) out[j.at("host")].push_back(why);
  }
  return out;
}

// Each measuring rank's NIC, at rank 0 in its rail (fabric/rank_nic.h).
// Names each rail rank's NIC in `rails` (on rank 0), and returns, on each host's first rank, the
// PCI addresses of the NICs its rail ranks use: the links the pass loads.
std::vector<std::string> name_nics(std::vector<PairwiseRail>& rails, const World& world,
                                   Collective& collective, const std::string& sysfs_root,
                                   int gpu_numa_node) {
  const int numa = gpu_numa_node >= 0 ? gpu_numa_node : numa_node_of_this_process(sysfs_root);
  const RankNic nic = rank_nic(sysfs_root, world.index_on_host(), numa, collective.name() == "nccl",
                               transport_settings_from_environment());
  bool in_a_rail = false;
  for (const PairwiseRail& rail : rails)
    in_a_rail = in_a_rail || std::find(rail.world_ranks.begin(), rail.world_ranks.end(),
                                       world.rank) != rail.world_ranks.end();
  std::vector<std::string> addresses;
  for (const std::string& a : gather_strings_on_host(
           world, in_a_rail ? nic_pci_address(sysfs_root, nic.name) : std::string()))
    if (!a.empty() && std::find(addresses.begin(), addresses.end(), a) == addresses.end())
      addresses.push_back(a);
  const std::vector<json> all = gather_records_at_root(world, json(nic.name));
  if (world.rank == 0)
    for (PairwiseRail& rail : rails)
      for (int r : rail.world_ranks) rail.nics.push_back(all[size_t(r)].get<std::string>());
  return addresses;
}

// The first pass's matrices, judged: suspects to confirm, not yet flags.
void judge_first_pass(PairwiseRecord& record, const SweepConfig& cfg,
                      const std::vector<PairTransfer>& first) {
  fill_matrices(record, first);
  for (PairwiseRail& rail : record.rails) {
    rail.judged_one_way = judge_pairs(rail.one_way, cfg.flag_fraction, cfg.fail_fraction);
    rail.judged_both_ways = judge_pairs(rail.both_ways, cfg.flag_fraction, cfg.fail_fraction);
  }
}

struct TrialsRun {
  std::vector<TrialTransfer> transfers;  // rank 0: every receiver's
  size_t run = 0;                        // trials that ran before the time cap ended them
};

// `trials` measured one after another on every rank, gathered at rank 0, until rank 0 finds
// `until_s` (steady_seconds) passed: the time cap (sweep.confirm_share), agreed after each trial.
// `beats`: the pass's progress so far, for the watchdog; advanced by one per trial.
TrialsRun run_trials(const std::string& plan_text, const World& world, Collective& collective,
                     PairPlan plan, int iters, double until_s, int64_t& beats) {
  const std::vector<PairTrial> trials = trials_from(broadcast_from_root(world, plan_text));
  if (trials.empty()) return {};
  if (world.rank == 0)
    spdlog::info("pairwise: {} suspect(s) measured again, each beside a control", trials.size());
  plan.iters = iters;
  TrialsRun out;
  const auto on_trial = [&](size_t done, size_t) {
    stage_beat(++beats);
    stop_point(world.comm);
    out.run = done;
    int go_on = world.rank == 0 ? int(steady_seconds() < until_s) : 0;
    mpiCheck(MPI_Bcast(&go_on, 1, MPI_INT, 0, world.comm));
    if (!go_on && done < trials.size() && world.rank == 0)
      spdlog::warn("pairwise: sweep.confirm_share's time is spent: {} of {} trial(s) ran", done,
                   trials.size());
    return go_on != 0;
  };
  out.transfers =
      gather_trials(world, measure_trials(collective, world.comm, trials, plan, on_trial));
  return out;
}

std::string trials_text(const std::vector<PairTrial>& trials) {
  json list = json::array();
  for (const PairTrial& t : trials) list.push_back(trial_json(t));
  return list.dump();
}

// Every suspect measured again beside its control, one trial at a time,
// and every flag or fail a second time (docs/sweep.md, "Confirming a flag").
// Both bounded: at most sweep.confirm_max trials in all, within sweep.confirm_share of the first
// pass's time; the suspects left over are named in the report as unconfirmed.
void confirm_suspects(PairwiseRecord& record, const SweepConfig& cfg, const World& world,
                      Collective& collective, const PairPlan& plan, size_t rounds) {
  const double until_s = steady_seconds() + cfg.confirm_share * record.first_pass_seconds;
  std::string text;
  if (world.rank == 0)
    text = trials_text(plan_confirmations(record, plan.floor_bytes, first_trials_allowed(record)));
  int64_t beats = int64_t(rounds);
  const TrialsRun first =
      run_trials(text, world, collective, plan, record.confirm_iters, until_s, beats);
  const PairLines lines{cfg.flag_fraction, cfg.fail_fraction, cfg.fail_floor};
  // Once the time is spent no second trial is planned: each trial agrees on going on only after
  // it ran.
  const bool time_left =
      broadcast_from_root(world, std::string(steady_seconds() < until_s ? "1" : "0")) == "1";
  if (world.rank == 0) {
    record_confirmations(record, first.transfers, lines, first.run);
    text = trials_text(plan_second_trials(record, time_left ? trials_left(record, first.run) : 0));
  }
  const TrialsRun second =
      run_trials(text, world, collective, plan, record.confirm_iters, until_s, beats);
  if (world.rank == 0) record_second_trials(record, second.transfers, lines, second.run);
}

}  // namespace

PairwiseRecord run_pairwise(const SweepConfig& cfg, const World& world, Collective& collective,
                            const std::string& sysfs_root, int gpu_numa_node) {
  const std::vector<IbErrorCounters> counters_before = world.index_on_host() == 0
                                                           ? read_ib_error_counters(sysfs_root)
                                                           : std::vector<IbErrorCounters>{};
  PairwiseRecord record;
  record.pair_bytes = cfg.pair_bytes;
  record.pair_iters = cfg.pair_iters;
  record.confirm_iters = 2 * cfg.pair_iters;
  record.min_pair_gbps = cfg.confirm_below_gbps;
  record.confirm_max = cfg.confirm_max;
  record.confirm_share = cfg.confirm_share;
  record.rails = rails_of(world, cfg.pair_ranks);
  const std::vector<std::string> nics_in_use =
      name_nics(record.rails, world, collective, sysfs_root, gpu_numa_node);
  PairPlan plan;
  plan.bytes = cfg.pair_bytes;
  plan.iters = cfg.pair_iters;
  plan.probe_bytes = std::min<uint64_t>(plan.probe_bytes, cfg.pair_bytes);
  plan.floor_bytes = std::min<uint64_t>(plan.floor_bytes, plan.probe_bytes);
  plan.corrupt_rank = cfg.plan.corrupt_rank;
  plan.slow_rank = cfg.slow_pair_rank;
  plan.slow_gbps = cfg.slow_pair_gbps;
  const auto rounds = tournament(record.rails);
  if (world.rank == 0)
    spdlog::info("pairwise: {} rail(s), {} round(s) of up to {} bytes x {} per pair and direction",
                 record.rails.size(), rounds.size(), cfg.pair_bytes, cfg.pair_iters);
  // Rounds over a slow link take longer: say where the pass is.
  const auto progress = [&world](size_t done, size_t total) {
    if (world.rank == 0) spdlog::info("pairwise: round {}/{} measured", done, total);
    stage_beat(int64_t(done));
    stop_point(world.comm);
  };
  const double started = steady_seconds();
  // The node's PCIe links in use, read by its first rank right after its first timed transfers:
  // its rail ranks' NICs, and its GPUs where the collective runs on them (NCCL).
  std::vector<std::string> loaded;
  const auto read_links_while_loaded = [&]() {
    if (world.index_on_host() != 0) return;
    loaded = slow_links_while_loaded(
        links_in_use(read_pcie_links(sysfs_root), nics_in_use, collective.name() == "nccl"));
  };
  const auto first = gather_transfers(world, measure_rounds(collective, world.comm, rounds, plan,
                                                            progress, read_links_while_loaded));
  if (world.rank == 0) judge_first_pass(record, cfg, first);
  const double confirming = steady_seconds();
  record.first_pass_seconds = confirming - started;
  confirm_suspects(record, cfg, world, collective, plan, rounds.size());
  record.confirm_seconds = steady_seconds() - confirming;
  record.seconds = steady_seconds() - started;
  record.node_reasons = node_findings(world, counters_before, sysfs_root, loaded);
  return record;
}

}  // namespace tp
