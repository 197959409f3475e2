// Rank 0's work at the end of a large job, on synthetic records: building the training report
// from every rank's step timings, judging an acceptance gate on it, the pairwise pass's matrices
// of every rail (NODES nodes, RAILS rails, one slow node confirmed on each), rendering the summary
// and writing the JSON. Prints the seconds of each part, the process's peak memory and the JSON's
// size, for docs/benchmarks.md ("Rank 0 at 4,096 ranks"). The goal: under 2 s and 1 GiB on one
// core, and a JSON under 20 MB.
//
//   report_assembly [RANKS [NODES [STEPS [RAILS]]]]   (default 4096 512 200 8)
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "app/accept/accept_config.h"
#include "app/accept/accept_report.h"
#include "app/cli/cli.h"
#include "app/report/report.h"
#include "app/report/summary.h"
#include "app/stages/sweep_confirm.h"
#include "app/stages/sweep_pairwise_report.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Every rank's steps alike but for a deterministic spread, so the statistics have work to do.
tp::RunRecord synthetic_run(int ranks, int nodes, int steps) {
  tp::RunRecord run;
  run.config.model = {8, 1024, 256, 8 * int64_t(ranks)};
  run.config.steps = steps + 20;
  run.config.warmup_steps = 20;
  run.steps_run = steps + 20;
  run.comm_timing_method = "synthetic";
  run.collective = {0, 262144, -1};
  json hosts = json::array();
  for (int n = 0; n < nodes; ++n) hosts.push_back("node-" + std::to_string(n));
  run.context = {{"tool", {{"version", "bench"}}},
                 {"world_size", ranks},
                 {"hosts", hosts},
                 {"backends", {{"compute", "cuda"}, {"comm", "nccl"}}},
                 {"warnings", json::array()}};
  for (int s = 0; s < steps; ++s) run.bucket_seconds.push_back({0.002, 0.002, 0.002, 0.001});
  const int per_node = (ranks + nodes - 1) / nodes;
  for (int r = 0; r < ranks; ++r) {
    tp::RankInfo info;
    info.rank = r;
    info.host = "node-" + std::to_string(r / per_node);
    info.local_rank = r % per_node;
    info.device = "cuda:" + std::to_string(r % per_node);
    info.cpu_affinity =
        std::to_string(4 * (r % per_node)) + "-" + std::to_string(4 * (r % per_node) + 3);
    info.numa_nodes = std::to_string((r % per_node) / 4);
    info.gemm_rate_flops = 5e13;
    info.gpu_uuid = "GPU-" + std::to_string(r);
    run.ranks.push_back(info);
    run.digests.push_back("00112233445566778899aabbccddeeff");
    run.cpu_share.push_back(4.0);
    std::vector<tp::StepTiming> timings;
    timings.reserve(size_t(steps));
    for (int s = 0; s < steps; ++s) {
      const double jitter = 1e-5 * double((r * 7919 + s * 104729) % 100);
      const double compute = 0.030 + jitter;
      timings.push_back(
          {0.0005, compute, 0.008, 0.001, 0.002, 0.0, 0.034 + jitter, 100.0 + s * 0.034 + jitter});
    }
    run.timings.push_back(std::move(timings));
  }
  return run;
}

// Every rail's first pass (jittered around 45 GB/s, node 17 at a third of it), as rank 0 gathers
// it.
tp::PairwiseRecord synthetic_pairwise(int nodes, int rails) {
  tp::PairwiseRecord p;
  p.pair_bytes = uint64_t(64) << 20;
  p.pair_iters = 5;
  p.confirm_iters = 10;
  for (int r = 0; r < rails; ++r) {
    tp::PairwiseRail rail;
    rail.rail = r;
    for (int n = 0; n < nodes; ++n) {
      rail.hosts.push_back("node-" + std::to_string(n));
      rail.world_ranks.push_back(n * rails + r);
      rail.nics.push_back("mlx5_" + std::to_string(r));
    }
    rail.one_way.assign(size_t(nodes), std::vector<double>(size_t(nodes), -1));
    for (int a = 0; a < nodes; ++a)
      for (int b = 0; b < nodes; ++b)
        if (a != b)
          rail.one_way[size_t(a)][size_t(b)] =
              (a == 17 || b == 17 ? 15.0 : 45.0) + 0.01 * double((a * 31 + b * 17 + r) % 100);
    rail.both_ways = rail.one_way;
    p.rails.push_back(std::move(rail));
  }
  return p;
}

// Rank 0's judgement of the first pass, its suspects planned and their trials recorded (every
// suspect measured again at a third of its control) as the pass would.
void judge_pairwise(tp::PairwiseRecord& p) {
  for (tp::PairwiseRail& rail : p.rails) {
    rail.judged_one_way = tp::judge_pairs(rail.one_way, 0.8, 0.5);
    rail.judged_both_ways = tp::judge_pairs(rail.both_ways, 0.8, 0.5);
  }
  const std::vector<tp::PairTrial> trials = tp::plan_confirmations(p, 1 << 20);
  std::vector<tp::TrialTransfer> measured;
  for (size_t i = 0; i < trials.size(); ++i)
    for (bool control : {false, true}) {
      const uint64_t bytes = control ? trials[i].control_bytes : trials[i].suspect_bytes;
      const double gbps = control ? 45.0 : 15.0;
      measured.push_back({int(i),
                          control,
                          {0, 0, trials[i].mode, double(bytes) / gbps / 1e9, bytes, 0, 0},
                          0.0,
                          10});
    }
  tp::record_confirmations(p, measured, tp::PairLines{});
}

// The gate as a host file would set it, through the command line's own parser.
tp::AcceptConfig gate_for(const tp::TrainConfig& train) {
  const char* argv[] = {"trainproof",
                        "accept",
                        "--accept.stages=train",
                        "--gate.min_au=0.5",
                        "--gate.max_step_cv=0.25",
                        "--gate.max_comm_exposed_fraction=0.2",
                        "--gate.min_straggler_score=0.8"};
  const tp::Invocation inv = tp::parse_invocation(int(std::size(argv)), argv);
  return tp::accept_config_from(inv.options, inv.option_source, train);
}

long peak_rss_kib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

}  // namespace

int main(int argc, char** argv) {
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 4096;
  const int nodes = argc > 2 ? std::atoi(argv[2]) : 512;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 200;
  const int rails = argc > 4 ? std::atoi(argv[4]) : 8;
  if (ranks < 1 || nodes < 1 || nodes > ranks || steps < 1 || rails < 0) {
    std::fprintf(stderr,
                 "usage: report_assembly [RANKS [NODES [STEPS [RAILS]]]] with NODES <= RANKS\n");
    return 2;
  }
  const tp::RunRecord run = synthetic_run(ranks, nodes, steps);
  tp::PairwiseRecord pairwise = synthetic_pairwise(nodes, rails);
  const long records_kib = peak_rss_kib();

  auto start = Clock::now();
  json report = tp::build_report(run);
  const double build_s = seconds_since(start);

  start = Clock::now();
  tp::StageAttempt trained;
  trained.stage = "train";
  for (const char* key : {"train", "ranks", "nodes"}) trained.sections[key] = report[key];
  trained.checks = report["gate"]["checks"];
  const json accepted = tp::accept_report(gate_for(run.config), {trained}, json::object(),
                                          report["context"], nullptr);
  const double gate_s = seconds_since(start);

  // The pairwise section as accept merges it, with its checks and node findings.
  start = Clock::now();
  judge_pairwise(pairwise);
  const double judge_s = seconds_since(start);

  start = Clock::now();
  json with_pairwise = accepted;
  if (rails > 0) {
    with_pairwise["sweep"]["pairwise"] = tp::pairwise_json(pairwise);
    for (const json& check : tp::pairwise_checks(pairwise))
      with_pairwise["gate"]["checks"].push_back(check);
    const auto findings = tp::pairwise_node_findings(pairwise);
    for (const std::string& warning : tp::pairwise_warnings(pairwise))
      with_pairwise["context"]["warnings"].push_back(warning);
    with_pairwise["findings_hosts"] = findings.size();
  }
  const double pairwise_s = seconds_since(start);

  start = Clock::now();
  const std::string summary = tp::render_summary(accepted);
  const double summary_s = seconds_since(start);

  start = Clock::now();
  const std::string text = with_pairwise.dump(2);
  const double dump_s = seconds_since(start);

  std::printf(
      "ranks %d, nodes %d, measured steps %d, pairwise rails %d\n"
      "build_report %.3f s, accept gate %.3f s, pairwise judgement %.3f s, pairwise report %.3f "
      "s, summary %.3f s (%zu lines), json %.3f s (%.1f MB)\n"
      "rank 0 total %.3f s; peak memory %.0f MiB (%.0f MiB of it the gathered records)\n"
      "verdict %s\n",
      ranks, nodes, steps, rails, build_s, gate_s, judge_s, pairwise_s, summary_s,
      size_t(std::count(summary.begin(), summary.end(), '\n')), dump_s, double(text.size()) / 1e6,
      build_s + gate_s + judge_s + pairwise_s + summary_s + dump_s, double(peak_rss_kib()) / 1024.0,
      double(records_kib) / 1024.0, accepted.value("verdict", "?").c_str());
  return 0;
}
