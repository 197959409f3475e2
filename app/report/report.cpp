#include "app/report/report.h"

#include "common/dtype_names.h"
#include "common/number_text.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "app/report/rank_gpu.h"
#include "app/report/report_buckets.h"
#include "common/errors.h"
#include "common/stats.h"

namespace tp {

using nlohmann::json;

json summary_json(const Summary& s) {
  return {{"min", s.min}, {"p50", s.p50}, {"p99", s.p99}, {"max", s.max}, {"mean", s.mean}};
}

namespace {

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
  return readable_number(seconds * 1e3) + " ms";
}

template <typename T>
std::vector<T> flatten(const std::vector<std::vector<T>>& nested) {
  std::vector<T> out;
  for (const auto& inner : nested) out.insert(out.end(), inner.begin(), inner.end());
  return out;
}

// Phase statistics over every rank and measured step.
json phases_json(const std::vector<StepTiming>& all) {
  json phases;
  for (const auto& [name, field] : kPhases)
    phases[name] = summary_json(summarize(column(all, field)));
  return phases;
}

// What the rank and node sections and the straggler checks all judge from.
struct RankFigures {
  std::vector<double> compute_p50;        // [rank]: its typical compute time
  std::vector<double> scores;             // [rank]: straggler score of compute_p50
  double typical_compute = 0;             // median over ranks of compute_p50
  std::vector<std::vector<double>> skew;  // [rank][measured step]
};

RankFigures rank_figures(const RunRecord& run) {
  RankFigures f;
  for (const auto& rank : run.timings)
    f.compute_p50.push_back(median(column(rank, &StepTiming::compute)));
  f.scores = straggler_scores(f.compute_p50);
  f.typical_compute = median(f.compute_p50);
  f.skew = arrival_skew(run.timings);
  return f;
}

// A rank is compared with the median of all ranks: with fewer than 3, that median is no healthy
// rank's own figure, so nothing is judged.
constexpr size_t kStragglerPeers = 3;

std::vector<int> stragglers_of(const RankFigures& f, size_t world) {
  std::vector<int> stragglers;
  if (world < kStragglerPeers) return stragglers;
  for (size_t r = 0; r < world; ++r)
    if (f.scores[r] < kStragglerThreshold) stragglers.push_back(int(r));
  return stragglers;
}

json rank_json(const RunRecord& run, const RankFigures& f, size_t r) {
  const TrainConfig& cfg = run.config;
  const RankInfo& info = run.ranks[r];
  json p50;
  for (const auto& [name, field] : kPhases) p50[name] = median(column(run.timings[r], field));
  const BatchShare share = batch_share(cfg.model.global_batch, int(run.ranks.size()), int(r));
  const double compute_rate =
      f.compute_p50[r] > 0 ? cfg.model.flops_per_sample() * share.samples / f.compute_p50[r] : 0.0;
  const std::vector<double>& skew = f.skew[r];
  return {{"rank", info.rank},
          {"host", info.host},
          {"local_rank", info.local_rank},
          {"device", info.device},
          {"cpu_affinity", info.cpu_affinity},
          {"numa_nodes", info.numa_nodes.empty() ? json(nullptr) : json(info.numa_nodes)},
          {"cpu_model", info.cpu_model.empty() ? json(nullptr) : json(info.cpu_model)},
          {"gpu", rank_gpu_json(info)},
          {"nic", rank_nic_json(info)},
          {"samples_per_step", share.samples},
          {"p50", p50},
          {"straggler_score", f.scores[r]},
          // As the node section judges it: with fewer than 3 ranks no straggler can be named.
          {"flagged", f.scores.size() >= kStragglerPeers && f.scores[r] < kStragglerThreshold},
          {"arrival_skew",
           {{"p50", median(skew)},
            {"max", skew.empty() ? 0.0 : *std::max_element(skew.begin(), skew.end())}}},
          {"gemm_rate_flops", info.gemm_rate_flops},
          {"compute_flops", compute_rate},
          {"digest", run.digests[r]}};
}

json ranks_json(const RunRecord& run, const RankFigures& f) {
  json ranks = json::array();
  for (size_t r = 0; r < run.ranks.size(); ++r) ranks.push_back(rank_json(run, f, r));
  return ranks;
}

// The hosts in order of their first rank, and each host's ranks.
struct Hosts {
  std::vector<std::string> names;
  std::map<std::string, std::vector<int>> ranks_of;
};

Hosts hosts_of(const std::vector<RankInfo>& ranks) {
  Hosts hosts;
  for (const auto& info : ranks) {
    if (!hosts.ranks_of.count(info.host)) hosts.names.push_back(info.host);
    hosts.ranks_of[info.host].push_back(info.rank);
  }
  return hosts;
}

struct NodeSection {
  json nodes = json::array();
  std::vector<std::string> flagged;  // hosts, in order
};

// A node is flagged when one of its ranks is, or when its typical compute is slow against the
// other nodes'.
NodeSection node_section(const RunRecord& run, const RankFigures& f) {
  Hosts hosts = hosts_of(run.ranks);
  std::vector<double> node_compute;
  for (const auto& h : hosts.names) {
    std::vector<double> mine;
    for (int r : hosts.ranks_of[h]) mine.push_back(f.compute_p50[r]);
    node_compute.push_back(median(mine));
  }
  const std::vector<double> node_scores = straggler_scores(node_compute);
  const std::map<std::string, std::vector<std::string>> affinity = affinity_reasons(run.ranks);
  NodeSection section;
  for (size_t n = 0; n < hosts.names.size(); ++n) {
    const std::vector<int>& ranks = hosts.ranks_of[hosts.names[n]];
    // Each reason with the check whose status it takes (a gate threshold may replace the
    // straggler check's default).
    json reasons = json::array(), findings = json::array();
    const auto add = [&](const std::string& check, const std::string& why,
                         const std::string& status = "") {
      reasons.push_back(why);
      findings.push_back(node_finding(check, why, status));
    };
    for (int r : ranks)
      if (f.scores.size() >= kStragglerPeers && f.scores[r] < kStragglerThreshold)
        add("min_straggler_score", "rank " + std::to_string(r) + " is a straggler: compute p50 " +
                                       ms(f.compute_p50[r]) + " against a median of " +
                                       ms(f.typical_compute) + " (score " + fixed2(f.scores[r]) +
                                       ")");
    if (node_scores.size() >= kStragglerPeers && node_scores[n] < kStragglerThreshold)
      add("flagged_nodes", "node compute p50 " + ms(node_compute[n]) +
                               " against a node median of " + ms(median(node_compute)) +
                               " (score " + fixed2(node_scores[n]) + ")");
    if (const auto t = run.topology_reasons.find(hosts.names[n]); t != run.topology_reasons.end())
      for (const std::string& why : t->second) add("flagged_nodes", why);
    if (const auto a = affinity.find(hosts.names[n]); a != affinity.end())
      for (const std::string& why : a->second) add("affinity", why, "warn");
    if (!reasons.empty()) section.flagged.push_back(hosts.names[n]);
    section.nodes.push_back({{"host", hosts.names[n]},
                             {"ranks", ranks},
                             {"compute_p50", node_compute[n]},
                             {"straggler_score", node_scores[n]},
                             {"flagged", !reasons.empty()},
                             {"reasons", reasons},
                             {"findings", findings}});
  }
  return section;
}

// Every replica must hold the same state: the digest most ranks hold, and the ranks that differ.
struct DigestVote {
  std::string majority;
  int majority_count = 0;
  std::vector<int> diverged;
};

DigestVote vote_on(const std::vector<std::string>& digests) {
  std::map<std::string, int> votes;
  for (const auto& d : digests) ++votes[d];
  DigestVote vote;
  vote.majority = digests.empty() ? "" : digests[0];
  for (const auto& [digest, count] : votes)
    if (count > votes[vote.majority]) vote.majority = digest;
  vote.majority_count = votes[vote.majority];
  for (size_t r = 0; r < digests.size(); ++r)
    if (digests[r] != vote.majority) vote.diverged.push_back(int(r));
  return vote;
}

json model_json(const TrainConfig& cfg) {
  return {{"layers", cfg.model.layers},
          {"hidden", cfg.model.hidden},
          {"seq", cfg.model.seq},
          {"global_batch", cfg.model.global_batch},
          // Which option set the batch; null per rank when model.batch did.
          {"batch_set_by", cfg.batch_from_checkpoint_ranks > 0
                               ? "the checkpoint: model.batch_per_rank x the " +
                                     std::to_string(cfg.batch_from_checkpoint_ranks) +
                                     " ranks that wrote it"
                           : cfg.batch_per_rank > 0 ? "model.batch_per_rank"
                                                    : "model.batch"},
          {"batch_per_rank", cfg.batch_per_rank > 0 ? json(cfg.batch_per_rank) : json(nullptr)},
          {"parameters", cfg.model.parameters()},
          {"dtype", dtype_name(cfg.dtype)},
          {"flops_per_step", cfg.model.flops_per_step()}};
}

json timing_json(const RunRecord& run) {
  const bool on_gpu =
      run.context.contains("backends") && run.context["backends"].value("compute", "") == "cuda";
  const bool device_comm = on_gpu && run.context["backends"].value("comm", "") == "nccl";
  return {{"clock", on_gpu ? "CUDA events on the compute stream for the phases; steady_clock for "
                             "arrival and checkpoint"
                           : "steady_clock"},
          {"overlap", run.config.overlap},
          {"comm", run.comm_timing_method},
          {"comm_exposed",
           device_comm ? "compute's end to the last bucket's end, CUDA events on the device"
                       : "wait after compute finished until every bucket is reduced, as the "
                         "host observes it"},
          {"buckets",
           "each bucket's time on the rank that started it last (the minimum over ranks), "
           "median over steps; busbw = 2(n-1)/n x bytes / time"},
          {"arrival",
           "entry into the step's first collective, on a clock aligned to "
           "rank 0 (Cristian ping-pong)"}};
}

// Where the run stopped and what it restored from.
void add_run_extent(json& train, const RunRecord& run) {
  const int64_t first_step = run.restored ? run.restored->step + 1 : 1;
  train["steps_completed"] = first_step - 1 + run.steps_run;
  train["steps_run"] = run.steps_run;
  train["first_step_end_unix"] = run.first_step_end_unix;
  train["restored_step"] = run.restored ? json(run.restored->step) : json(nullptr);
  train["preempted"] =
      run.preempted ? json{{"signal", run.preempted->first}, {"after_step", run.preempted->second}}
                    : json(nullptr);
}

// Throughput: a step ends when its slowest rank ends.
// Population stddev over mean; null with fewer than two steps, where no spread is measured.
json coefficient_of_variation(const std::vector<double>& values) {
  if (values.size() < 2) return nullptr;
  double mean = 0, squares = 0;
  for (double v : values) mean += v;
  mean /= double(values.size());
  for (double v : values) squares += (v - mean) * (v - mean);
  return mean > 0 ? json(std::sqrt(squares / double(values.size())) / mean) : json(nullptr);
}

void add_throughput(json& train, const RunRecord& run, const std::vector<StepTiming>& all) {
  const TrainConfig& cfg = run.config;
  const size_t steps = run.timings.empty() ? 0 : run.timings[0].size();
  double wall = 0, compute_sum = 0, step_sum = 0;
  std::vector<double> step_walls;  // each step as the job saw it: its slowest rank's
  for (size_t i = 0; i < steps; ++i) {
    double slowest = 0;
    for (const auto& rank : run.timings) slowest = std::max(slowest, rank[i].step);
    wall += slowest;
    step_walls.push_back(slowest);
  }
  for (const auto& t : all) {
    compute_sum += t.compute;
    step_sum += t.step;
  }
  const double mean_step = steps ? wall / double(steps) : 0.0;
  const double achieved = mean_step > 0 ? cfg.model.flops_per_step() / mean_step : 0.0;
  double gemm_rate = 0;
  for (const auto& info : run.ranks) gemm_rate += info.gemm_rate_flops;
  train["au"] = step_sum > 0 ? compute_sum / step_sum : 0.0;
  train["step_cv"] = coefficient_of_variation(step_walls);
  train["samples_per_s"] = mean_step > 0 ? double(cfg.model.global_batch) / mean_step : 0.0;
  train["tokens_per_s"] = mean_step > 0 ? double(cfg.model.tokens_per_step()) / mean_step : 0.0;
  train["achieved_flops"] = achieved;
  train["gemm_rate_flops"] = gemm_rate;
  train["achieved_vs_gemm_rate"] = gemm_rate > 0 ? achieved / gemm_rate : 0.0;
}

json train_json(const RunRecord& run, const std::vector<StepTiming>& all, const json& phases,
                const RankFigures& f, const std::string& final_digest) {
  json train;
  add_run_extent(train, run);
  train["final_digest"] = final_digest;
  train["warmup_steps"] = run.config.warmup_steps;
  train["measured_steps"] = run.timings.empty() ? 0 : run.timings[0].size();
  train["model"] = model_json(run.config);
  train["phases"] = phases;
  train["timing"] = timing_json(run);
  train["buckets"] = bucket_sizes_json(run.config, int(run.ranks.size()), run.bucket_seconds);
  train["arrival_skew"] = summary_json(summarize(flatten(f.skew)));
  add_throughput(train, run, all);
  return train;
}

json replica_digest_check(const DigestVote& vote, size_t world) {
  const bool same = vote.diverged.empty();
  return gate_check(
      "replica_digest", vote.diverged.size(), 0, same ? "pass" : "fail",
      same ? "all " + std::to_string(world) + " ranks hold the same state " + vote.majority
           : "ranks " + join_ranks(vote.diverged) + " hold a state that differs from the " +
                 std::to_string(vote.majority_count) + " ranks at " + vote.majority);
}

json collective_correctness_check(const CollectiveCheck& cc) {
  return gate_check(
      "collective_correctness", cc.wrong_elements, 0, cc.wrong_elements == 0 ? "pass" : "fail",
      cc.wrong_elements == 0
          ? "allreduce of " + std::to_string(cc.checked_elements) + " known values was exact"
          : std::to_string(cc.wrong_elements) + " of " + std::to_string(cc.checked_elements) +
                " allreduce results were wrong, first seen on rank " +
                std::to_string(cc.first_wrong_rank));
}

json straggler_check(const RankFigures& f, const std::vector<int>& stragglers) {
  if (f.scores.size() < kStragglerPeers)
    return gate_check("min_straggler_score", nullptr, kStragglerThreshold, "n/a",
                      std::to_string(f.scores.size()) +
                          " rank(s): a straggler needs at least 3 ranks to compare against (with "
                          "2, the median is their mean, and one noisy rank would be named)");
  const double worst = f.scores.empty() ? 1.0 : *std::min_element(f.scores.begin(), f.scores.end());
  return gate_check("min_straggler_score", worst, kStragglerThreshold,
                    stragglers.empty() ? "pass" : "warn",
                    stragglers.empty() ? "no rank computes more slowly than 1/0.8 of the median"
                                       : "stragglers: ranks " + join_ranks(stragglers));
}

// A node is judged by what could be compared: its ranks' compute (3 ranks or more), its own
// compute against other nodes' (3 nodes or more), and its topology (the preflight read it). With
// none of them, nothing was measured: n/a, never PASS.
json flagged_nodes_check(const RunRecord& run, const std::vector<std::string>& flagged_nodes) {
  const size_t nodes = hosts_of(run.ranks).names.size();
  std::vector<std::string> compared;
  if (run.ranks.size() >= kStragglerPeers) compared.push_back("ranks' compute");
  if (nodes >= kStragglerPeers) compared.push_back("nodes' compute");
  if (run.topology_measured) compared.push_back("topology");
  if (std::any_of(run.ranks.begin(), run.ranks.end(),
                  [](const RankInfo& r) { return !r.gpu_uuid.empty(); }))
    compared.push_back("GPU and NIC affinity");
  if (compared.empty())
    return gate_check("flagged_nodes", nullptr, 0, "n/a",
                      std::to_string(run.ranks.size()) + " rank(s) on " + std::to_string(nodes) +
                          " node(s): none to compare a node against (a straggler needs 3 ranks "
                          "or nodes), and no topology read by this stage");
  std::string node_list, what;
  for (const auto& h : flagged_nodes) node_list += (node_list.empty() ? "" : ", ") + h;
  for (const auto& c : compared) what += (what.empty() ? "" : ", ") + c;
  return gate_check(
      "flagged_nodes", flagged_nodes.size(), 0, flagged_nodes.empty() ? "pass" : "warn",
      flagged_nodes.empty() ? "no node flagged (compared: " + what + ")" : "flagged: " + node_list);
}

// A run that measured nothing proves nothing, so it is never PASS. A requeued job that finds its
// training done runs no step at all: NONE, exit 0, rather than a failure.
json measured_steps_check(const RunRecord& run) {
  const size_t measured = run.timings.empty() ? 0 : run.timings.front().size();
  if (run.steps_run == 0) {
    const int64_t at = run.restored ? run.restored->step : run.config.steps;
    return gate_check("measured_steps", 0, 1, "none",
                      "training already complete at step " + std::to_string(at) +
                          ": no step ran, nothing was measured");
  }
  if (measured == 0)
    return gate_check("measured_steps", 0, 1, "warn",
                      "all " + std::to_string(run.steps_run) +
                          " steps run were warm-up (train.warmup_steps=" +
                          std::to_string(run.config.warmup_steps) + "): nothing was measured");
  return gate_check("measured_steps", measured, 1, "pass",
                    std::to_string(measured) + " steps measured after warm-up");
}

void add_data_section(json& report, const RunRecord& run, const json& stall) {
  report["data"] = data_json(run.config, *run.data);
  report["data"]["stall"] = stall;  // the step's wait for its batch
  for (const char* key : {"page_cache_warning", "cpu_warning"})
    if (const std::string w = report["data"][key]; !w.empty())
      report["context"]["warnings"].push_back(w);
}

}  // namespace

json build_report(const RunRecord& run) {
  const std::vector<StepTiming> all = flatten(run.timings);
  const json phases = phases_json(all);
  const RankFigures figures = rank_figures(run);
  const NodeSection nodes = node_section(run, figures);
  const DigestVote vote = vote_on(run.digests);

  const json checks = json::array(
      {replica_digest_check(vote, run.ranks.size()), collective_correctness_check(run.collective),
       straggler_check(figures, stragglers_of(figures, run.ranks.size())),
       flagged_nodes_check(run, nodes.flagged), measured_steps_check(run)});

  json report;
  report["schema"] = kReportSchema;
  report["verdict"] = verdict_of_checks(checks);
  report["context"] = run.context;
  report["ranks"] = ranks_json(run, figures);
  report["nodes"] = nodes.nodes;
  report["train"] = train_json(run, all, phases, figures, vote.majority);
  report["gate"] = {{"checks", checks}};
  if (!run.config.checkpoint_dir.empty()) {
    report["checkpoint"] = checkpoint_json(run, phases["checkpoint"]);
    if (const std::string w = report["checkpoint"]["cpu_warning"]; !w.empty())
      report["context"]["warnings"].push_back(w);
  }
  if (run.data) add_data_section(report, run, phases["data"]);
  return report;
}

}  // namespace tp
