#include "app/stages/run_trace.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <limits>

#include "app/stages/stage_watch.h"
#include "fabric/bus_bandwidth.h"
#include "mpi/check.h"
#include "trace/trace_file.h"

namespace tp {
namespace {

using nlohmann::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr size_t kHostWidth = 64;  // HOST_NAME_MAX
constexpr size_t kOpWidth = 16;

// Who the trace belongs to: rank 0's report, the same attributes on every rank. The report's
// path and the subcommand are every rank's already, and go to the file as given: a path need not
// be UTF-8, which JSON text must be.
json trace_identity(const World& world, const json& report) {
  std::string text;
  if (world.rank == 0) {
    const json context = report.value("context", json::object());
    text = json{{"schema", "trainproof.trace/1"},
                {"run_id", context.value("run_id", "")},
                {"scenario_hash", context.value("scenario_hash", "")},
                {"start_time", context.value("start_time", "")}}
               .dump(-1, ' ', false, json::error_handler_t::replace);
  }
  return json::parse(broadcast_from_root(world, text));
}

void write_train(TraceFile& file, const RunTrace& t) {
  const uint64_t steps = t.timings.size();
  file.root_values("train/step_number", {steps}, t.steps);
  const auto field = [&](const char* name, double StepTiming::*member) {
    std::vector<double> row;
    for (const StepTiming& s : t.timings) row.push_back(s.*member);
    file.rank_rows(std::string("train/") + name, {steps}, row);
  };
  file.rank_rows("train/start", {steps}, t.step_start);
  field("arrival", &StepTiming::arrival);
  field("data", &StepTiming::data);
  field("compute", &StepTiming::compute);
  field("comm", &StepTiming::comm);
  field("comm_exposed", &StepTiming::comm_exposed);
  field("optimizer", &StepTiming::optimizer);
  field("checkpoint", &StepTiming::checkpoint);
  field("step", &StepTiming::step);
  size_t buckets = 0;
  for (const auto& step : t.buckets) buckets = std::max(buckets, step.size());
  std::vector<double> starts(steps * buckets, kNaN), ends(starts.size(), kNaN);
  for (size_t s = 0; s < t.buckets.size() && s < steps; ++s)
    for (size_t b = 0; b < t.buckets[s].size(); ++b) {
      starts[s * buckets + b] = t.buckets[s][b].start;
      ends[s * buckets + b] = t.buckets[s][b].end;
    }
  file.rank_rows("train/bucket_start", {steps, buckets}, starts);
  file.rank_rows("train/bucket_end", {steps, buckets}, ends);
}

void write_checkpoints(TraceFile& file, const RunTrace& t, int ranks) {
  const uint64_t count = t.saves.size();
  std::vector<int64_t> step, bytes;
  std::vector<double> serialize, write, fsync, commit, total, stall;
  std::vector<double> rank_gbps(uint64_t(ranks) * count, kNaN);
  for (size_t c = 0; c < t.saves.size(); ++c) {
    const CheckpointSave& s = t.saves[c];
    step.push_back(s.step);
    bytes.push_back(int64_t(s.bytes));
    serialize.push_back(s.serialize_s);
    write.push_back(s.write_s);
    fsync.push_back(s.max_fsync_s);
    commit.push_back(s.commit_s);
    total.push_back(s.total_s);
    stall.push_back(s.stall_s);
    for (size_t r = 0; r < s.rank_gbps.size() && r < size_t(ranks); ++r)
      rank_gbps[r * count + c] = s.rank_gbps[r];
  }
  file.root_values("checkpoints/step", {count}, step);
  file.root_values("checkpoints/bytes", {count}, bytes);
  file.root_values("checkpoints/serialize_s", {count}, serialize);
  file.root_values("checkpoints/write_s", {count}, write);
  file.root_values("checkpoints/fsync_s", {count}, fsync);
  file.root_values("checkpoints/commit_s", {count}, commit);
  file.root_values("checkpoints/total_s", {count}, total);
  file.root_values("checkpoints/stall_s", {count}, stall);
  file.root_values("checkpoints/rank_write_gbps", {uint64_t(ranks), count}, rank_gbps);
  std::vector<double> mine;
  for (const auto& [s, seconds] : t.stalls) mine.push_back(seconds);
  file.rank_rows("checkpoints/rank_stall_s", {mine.size()}, mine);
}

void write_sweep(TraceFile& file, const RunTrace& t) {
  const uint64_t rows = t.sweep_rows.size();
  size_t iters = 0;
  for (const SweepRow& r : t.sweep_rows)
    iters = std::max({iters, r.iteration_s.size(), r.rank_iteration_s.size()});
  std::vector<std::string> ops;
  std::vector<int64_t> bytes, in_place;
  std::vector<double> slowest(rows * iters, kNaN), mine(slowest.size(), kNaN);
  for (size_t w = 0; w < rows; ++w) {
    const SweepRow& r = t.sweep_rows[w];
    ops.push_back(sweep_op_name(r.op));
    bytes.push_back(int64_t(r.bytes));
    in_place.push_back(r.in_place ? 1 : 0);
    std::copy(r.iteration_s.begin(), r.iteration_s.end(), slowest.begin() + long(w * iters));
    std::copy(r.rank_iteration_s.begin(), r.rank_iteration_s.end(), mine.begin() + long(w * iters));
  }
  file.root_strings("sweep/op", kOpWidth, ops);
  file.root_values("sweep/bytes", {rows}, bytes);
  file.root_values("sweep/in_place", {rows}, in_place);
  file.root_values("sweep/iteration_s", {rows, iters}, slowest);
  file.rank_rows("sweep/rank_iteration_s", {rows, iters}, mine);
}

// Rank 0 holds the matrices; every rank learns how many rails and which to make the same datasets.
void write_pairwise(TraceFile& file, const RunTrace& t, const World& world) {
  int rails = int(t.pairwise.size());
  mpiCheck(MPI_Bcast(&rails, 1, MPI_INT, 0, world.comm));
  for (int k = 0; k < rails; ++k) {
    const RunTrace::PairwiseMatrices* m = world.rank == 0 ? &t.pairwise[size_t(k)] : nullptr;
    int rail = m ? m->rail : 0;
    mpiCheck(MPI_Bcast(&rail, 1, MPI_INT, 0, world.comm));
    const uint64_t n = m ? m->nodes : 0;
    const std::string group = "pairwise/rail" + std::to_string(rail) + "/";
    file.root_values(group + "one_way_gbps", {n, n}, m ? m->one_way : std::vector<double>{});
    file.root_values(group + "both_ways_gbps", {n, n}, m ? m->both_ways : std::vector<double>{});
  }
}

}  // namespace

void take_parts(RunTrace& into, RunTrace&& from) {
  if (from.has_train) {
    into.has_train = true;
    into.steps = std::move(from.steps);
    into.timings = std::move(from.timings);
    into.step_start = std::move(from.step_start);
    into.buckets = std::move(from.buckets);
  }
  if (from.has_checkpoints) {
    into.has_checkpoints = true;
    into.saves = std::move(from.saves);
    into.stalls = std::move(from.stalls);
  }
  if (from.has_sweep) {
    into.has_sweep = true;
    into.sweep_rows = std::move(from.sweep_rows);
  }
  if (from.has_pairwise) {
    into.has_pairwise = true;
    into.pairwise = std::move(from.pairwise);
  }
}

void add_train_trace(RunTrace& trace, const TrainResult& result) {
  trace.has_train = true;
  trace.steps = result.measured_steps;
  trace.timings = result.measured;
  trace.step_start = result.step_start;
  trace.buckets = result.bucket_intervals;
}

void write_run_trace(const Invocation& inv, const TrainConfig& config, const World& world,
                     json& report, const RunTrace& trace, const std::string& subcommand) {
  const std::string report_path = inv.options["report"].as<std::string>();
  const std::string path = trace_path_for(inv.options["trace"].as<std::string>(), report_path);
  if (path.empty()) {
    if (world.rank == 0) report["context"]["trace"] = nullptr;
    return;
  }
  const json identity = trace_identity(world, report);
  StageWatch watch(config, report_path, world, "trace");
  std::string problem;
  try {
    TraceFile file(path, world.comm);
    for (const auto& [name, value] : identity.items())
      file.attribute(name, value.get<std::string>());
    file.attribute("report", report_path);
    file.attribute("subcommand", subcommand);
    file.attribute("world_size", int64_t(world.size));
    file.rank_strings("ranks/host", kHostWidth, world.host);
    if (trace.has_train) write_train(file, trace);
    if (trace.has_checkpoints) write_checkpoints(file, trace, world.size);
    if (trace.has_sweep) write_sweep(file, trace);
    if (trace.has_pairwise) write_pairwise(file, trace, world);
    file.close();
  } catch (const std::exception& e) {
    problem = e.what();
  }
  problem = first_problem(world, problem);
  watch.end();
  if (world.rank != 0) return;
  if (problem.empty()) {
    report["context"]["trace"] = path;
    return;
  }
  spdlog::warn("the trace was not written: {}", problem);
  report["context"]["trace"] = nullptr;
  report["context"]["warnings"].push_back("the trace was not written (--trace): " + problem);
}

}  // namespace tp
