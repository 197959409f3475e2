#include "app/report.h"

#include <algorithm>
#include <map>

#include "common/errors.h"
#include "common/stats.h"

namespace tp {
namespace {

using nlohmann::json;

json summary_json(const Summary& s) {
  return {{"min", s.min}, {"p50", s.p50}, {"p99", s.p99}, {"max", s.max}, {"mean", s.mean}};
}

using Field = double StepTiming::*;
const std::vector<std::pair<const char*, Field>> kPhases = {
    {"data", &StepTiming::data},
    {"compute", &StepTiming::compute},
    {"comm", &StepTiming::comm},
    {"comm_exposed", &StepTiming::comm_exposed},
    {"optimizer", &StepTiming::optimizer},
    {"checkpoint", &StepTiming::checkpoint},
    {"step", &StepTiming::step}};

std::vector<double> column(const std::vector<StepTiming>& steps, Field field) {
  std::vector<double> values;
  for (const auto& t : steps) values.push_back(t.*field);
  return values;
}

// Per rank and step: how much later than the earliest rank it entered the first collective.
std::vector<std::vector<double>> arrival_skew(const std::vector<std::vector<StepTiming>>& timings) {
  std::vector<std::vector<double>> skew(timings.size());
  const size_t steps = timings.empty() ? 0 : timings[0].size();
  for (size_t i = 0; i < steps; ++i) {
    double earliest = timings[0][i].arrival;
    for (const auto& rank : timings) earliest = std::min(earliest, rank[i].arrival);
    for (size_t r = 0; r < timings.size(); ++r) skew[r].push_back(timings[r][i].arrival - earliest);
  }
  return skew;
}

json check(const std::string& name, json value, json threshold, const std::string& status,
           const std::string& reason) {
  return {{"name", name},
          {"value", value},
          {"threshold", threshold},
          {"status", status},
          {"reason", reason}};
}

std::string join_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

std::string fixed2(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", value);
  return text;
}

std::string ms(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g ms", seconds * 1e3);
  return text;
}

json checkpoint_json(const RunRecord& run, const json& stall) {
  const TrainConfig& cfg = run.config;
  json c{{"dir", cfg.checkpoint_dir},
         {"layout", cfg.checkpoint_layout},
         {"shard_optimizer", cfg.checkpoint_shard_optimizer},
         {"async", cfg.checkpoint_async},
         {"every", cfg.checkpoint_every},
         {"keep", cfg.checkpoint_keep},
         {"cold_read", cfg.checkpoint_cold_read},
         {"saves", json::array()},
         {"stall", stall}};
  uint64_t bytes = 0;
  std::vector<double> gbps, rank_gbps, fsync, commit, total, stalls;
  for (const CheckpointSave& s : run.saves) {
    c["saves"].push_back({{"step", s.step},
                          {"bytes", s.bytes},
                          {"write_gbps", s.write_gbps()},
                          {"fsync_s", s.max_fsync_s},
                          {"commit_s", s.commit_s},
                          {"total_s", s.total_s},
                          {"stall_s", s.stall_s}});
    bytes = s.bytes;
    gbps.push_back(s.write_gbps());
    rank_gbps.insert(rank_gbps.end(), s.rank_gbps.begin(), s.rank_gbps.end());
    fsync.push_back(s.max_fsync_s);
    commit.push_back(s.commit_s);
    total.push_back(s.total_s);
    stalls.push_back(s.stall_s);
  }
  c["bytes"] = bytes;
  c["final_wait_s"] = run.checkpoint_final_wait_s;
  // Aggregate: all ranks' bytes over first rank's start to last rank's end, median over saves.
  c["write_gbps"] = gbps.empty() ? json(nullptr) : json(median(gbps));
  c["rank_write_gbps"] = rank_gbps.empty()
                             ? json(nullptr)
                             : json{{"min", *std::min_element(rank_gbps.begin(), rank_gbps.end())},
                                    {"max", *std::max_element(rank_gbps.begin(), rank_gbps.end())}};
  c["fsync_s"] = fsync.empty() ? json(nullptr) : json(summary_json(summarize(fsync)));
  c["commit_s"] = commit.empty() ? json(nullptr) : json(summary_json(summarize(commit)));
  // Per checkpoint, start to commit, next to what training waited for it (async hides the rest).
  c["total_s"] = total.empty() ? json(nullptr) : json(summary_json(summarize(total)));
  c["stall_s"] = stalls.empty() ? json(nullptr) : json(summary_json(summarize(stalls)));
  c["restore"] =
      run.restored
          ? json{{"step", run.restored->step},
                 {"folder", run.restored->folder},
                 {"bytes", run.restored->bytes},
                 {"seconds", run.restored->seconds},
                 {"restore_gbps", run.restored->gbps()},
                 {"rejected", run.restored->rejected},
                 {"rank_restore_gbps",
                  {{"min", run.restored->rank_gbps_min}, {"max", run.restored->rank_gbps_max}}}}
          : json(nullptr);
  c["restore_gbps"] = run.restored ? json(run.restored->gbps()) : json(nullptr);
  return c;
}

}  // namespace

int exit_code_for(const std::string& verdict) {
  return verdict == "FAIL" ? kExitFail : kExitPass;
}

json build_report(const RunRecord& run) {
  const TrainConfig& cfg = run.config;
  const size_t world = run.ranks.size();
  json report;
  report["schema"] = kReportSchema;
  report["verdict"] = "PASS";
  report["context"] = run.context;

  // Phase statistics over every rank and measured step.
  std::vector<StepTiming> all;
  for (const auto& rank : run.timings) all.insert(all.end(), rank.begin(), rank.end());
  json phases;
  for (const auto& [name, field] : kPhases)
    phases[name] = summary_json(summarize(column(all, field)));

  // Straggler scores from each rank's typical compute time.
  std::vector<double> compute_p50;
  for (const auto& rank : run.timings)
    compute_p50.push_back(median(column(rank, &StepTiming::compute)));
  const std::vector<double> scores = straggler_scores(compute_p50);
  const double typical_compute = median(compute_p50);
  const auto skew = arrival_skew(run.timings);
  std::vector<double> all_skew;
  for (const auto& s : skew) all_skew.insert(all_skew.end(), s.begin(), s.end());

  const double local_flops_per_sample = cfg.model.flops_per_sample();
  json ranks = json::array();
  std::vector<int> stragglers;
  for (size_t r = 0; r < world; ++r) {
    const RankInfo& info = run.ranks[r];
    json p50;
    for (const auto& [name, field] : kPhases) p50[name] = median(column(run.timings[r], field));
    const BatchShare share = batch_share(cfg.model.global_batch, int(world), int(r));
    const double compute_rate =
        compute_p50[r] > 0 ? local_flops_per_sample * share.samples / compute_p50[r] : 0.0;
    const bool flagged = scores[r] < kStragglerThreshold;
    if (flagged) stragglers.push_back(int(r));
    ranks.push_back(
        {{"rank", info.rank},
         {"host", info.host},
         {"local_rank", info.local_rank},
         {"device", info.device},
         {"cpu_affinity", info.cpu_affinity},
         {"numa_nodes", info.numa_nodes.empty() ? json(nullptr) : json(info.numa_nodes)},
         {"samples_per_step", share.samples},
         {"p50", p50},
         {"straggler_score", scores[r]},
         {"flagged", flagged},
         {"arrival_skew",
          {{"p50", median(skew[r])},
           {"max", skew[r].empty() ? 0.0 : *std::max_element(skew[r].begin(), skew[r].end())}}},
         {"gemm_rate_flops", info.gemm_rate_flops},
         {"compute_flops", compute_rate},
         {"digest", run.digests[r]}});
  }

  // Nodes: a node is flagged when one of its ranks is, or when its typical compute is slow
  // against the other nodes'.
  std::vector<std::string> hosts;
  std::map<std::string, std::vector<int>> ranks_of;
  for (const auto& info : run.ranks) {
    if (!ranks_of.count(info.host)) hosts.push_back(info.host);
    ranks_of[info.host].push_back(info.rank);
  }
  std::vector<double> node_compute;
  for (const auto& h : hosts) {
    std::vector<double> mine;
    for (int r : ranks_of[h]) mine.push_back(compute_p50[r]);
    node_compute.push_back(median(mine));
  }
  const std::vector<double> node_scores = straggler_scores(node_compute);
  json nodes = json::array();
  std::vector<std::string> flagged_nodes;
  for (size_t n = 0; n < hosts.size(); ++n) {
    json reasons = json::array();
    for (int r : ranks_of[hosts[n]])
      if (scores[r] < kStragglerThreshold)
        reasons.push_back("rank " + std::to_string(r) + " is a straggler: compute p50 " +
                          ms(compute_p50[r]) + " against a median of " + ms(typical_compute) +
                          " (score " + fixed2(scores[r]) + ")");
    if (node_scores[n] < kStragglerThreshold)
      reasons.push_back("node compute p50 " + ms(node_compute[n]) + " against a node median of " +
                        ms(median(node_compute)) + " (score " + fixed2(node_scores[n]) + ")");
    if (!reasons.empty()) flagged_nodes.push_back(hosts[n]);
    nodes.push_back({{"host", hosts[n]},
                     {"ranks", ranks_of[hosts[n]]},
                     {"compute_p50", node_compute[n]},
                     {"straggler_score", node_scores[n]},
                     {"flagged", !reasons.empty()},
                     {"reasons", reasons}});
  }

  // Throughput: a step ends when its slowest rank ends.
  const size_t steps = run.timings.empty() ? 0 : run.timings[0].size();
  double wall = 0, compute_sum = 0, step_sum = 0;
  for (size_t i = 0; i < steps; ++i) {
    double slowest = 0;
    for (const auto& rank : run.timings) slowest = std::max(slowest, rank[i].step);
    wall += slowest;
  }
  for (const auto& t : all) {
    compute_sum += t.compute;
    step_sum += t.step;
  }
  const double mean_step = steps ? wall / double(steps) : 0.0;
  const double achieved = mean_step > 0 ? cfg.model.flops_per_step() / mean_step : 0.0;
  double gemm_rate = 0;
  for (const auto& info : run.ranks) gemm_rate += info.gemm_rate_flops;

  // Correctness: every replica must hold the same state.
  std::map<std::string, int> votes;
  for (const auto& d : run.digests) ++votes[d];
  std::string majority = run.digests.empty() ? "" : run.digests[0];
  for (const auto& [digest, count] : votes)
    if (count > votes[majority]) majority = digest;
  std::vector<int> diverged;
  for (size_t r = 0; r < run.digests.size(); ++r)
    if (run.digests[r] != majority) diverged.push_back(int(r));

  json train;
  const int64_t first_step = run.restored ? run.restored->step + 1 : 1;
  train["steps_completed"] = first_step - 1 + run.steps_run;
  train["steps_run"] = run.steps_run;
  train["first_step_end_unix"] = run.first_step_end_unix;
  train["restored_step"] = run.restored ? json(run.restored->step) : json(nullptr);
  train["preempted"] =
      run.preempted ? json{{"signal", run.preempted->first}, {"after_step", run.preempted->second}}
                    : json(nullptr);
  train["final_digest"] = majority;
  train["warmup_steps"] = cfg.warmup_steps;
  train["measured_steps"] = steps;
  train["model"] = {{"layers", cfg.model.layers},
                    {"hidden", cfg.model.hidden},
                    {"seq", cfg.model.seq},
                    {"global_batch", cfg.model.global_batch},
                    {"parameters", cfg.model.parameters()},
                    {"dtype", cfg.dtype},
                    {"flops_per_step", cfg.model.flops_per_step()}};
  train["phases"] = phases;
  train["timing"] = {{"clock", "steady_clock"},
                     {"overlap", cfg.overlap},
                     {"comm", run.comm_timing_method},
                     {"comm_exposed", "wait after compute finished until every bucket is reduced"},
                     {"arrival",
                      "entry into the step's first collective, on a clock aligned to "
                      "rank 0 (Cristian ping-pong)"}};
  train["arrival_skew"] = summary_json(summarize(all_skew));
  train["au"] = step_sum > 0 ? compute_sum / step_sum : 0.0;
  train["samples_per_s"] = mean_step > 0 ? double(cfg.model.global_batch) / mean_step : 0.0;
  train["tokens_per_s"] = mean_step > 0 ? double(cfg.model.tokens_per_step()) / mean_step : 0.0;
  train["achieved_flops"] = achieved;
  train["gemm_rate_flops"] = gemm_rate;
  train["achieved_vs_gemm_rate"] = gemm_rate > 0 ? achieved / gemm_rate : 0.0;

  json checks = json::array();
  checks.push_back(check(
      "replica_digest", diverged.size(), 0, diverged.empty() ? "pass" : "fail",
      diverged.empty() ? "all " + std::to_string(world) + " ranks hold the same state " + majority
                       : "ranks " + join_ranks(diverged) + " hold a state that differs from the " +
                             std::to_string(votes[majority]) + " ranks at " + majority));
  const CollectiveCheck& cc = run.collective;
  checks.push_back(check(
      "collective_correctness", cc.wrong_elements, 0, cc.wrong_elements == 0 ? "pass" : "fail",
      cc.wrong_elements == 0
          ? "allreduce of " + std::to_string(cc.checked_elements) + " known values was exact"
          : std::to_string(cc.wrong_elements) + " of " + std::to_string(cc.checked_elements) +
                " allreduce results were wrong, first seen on rank " +
                std::to_string(cc.first_wrong_rank)));
  const double worst = scores.empty() ? 1.0 : *std::min_element(scores.begin(), scores.end());
  checks.push_back(
      check("straggler_score", worst, kStragglerThreshold, stragglers.empty() ? "pass" : "warn",
            stragglers.empty() ? "no rank computes more slowly than 1/0.8 of the median"
                               : "stragglers: ranks " + join_ranks(stragglers)));
  std::string node_list;
  for (const auto& h : flagged_nodes) node_list += (node_list.empty() ? "" : ", ") + h;
  checks.push_back(check("flagged_nodes", flagged_nodes.size(), 0,
                         flagged_nodes.empty() ? "pass" : "warn",
                         flagged_nodes.empty() ? "no node flagged" : "flagged: " + node_list));

  std::string verdict = "PASS";
  for (const auto& c : checks) {
    if (c["status"] == "fail") verdict = "FAIL";
    if (c["status"] == "warn" && verdict == "PASS") verdict = "WARN";
  }
  report["verdict"] = verdict;
  report["ranks"] = ranks;
  report["nodes"] = nodes;
  report["train"] = train;
  report["gate"] = {{"checks", checks}};
  if (!cfg.checkpoint_dir.empty())
    report["checkpoint"] = checkpoint_json(run, phases["checkpoint"]);
  if (run.data) {
    report["data"] = data_json(cfg, *run.data);
    report["data"]["stall"] = phases["data"];  // the step's wait for its batch
    for (const char* key : {"page_cache_warning", "cpu_warning"})
      if (const std::string w = report["data"][key]; !w.empty())
        report["context"]["warnings"].push_back(w);
  }
  return report;
}

}  // namespace tp
