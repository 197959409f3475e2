// The report's checkpoint section (docs/checkpoint.md, "In the report"): each save's figures, the
// aggregate write bandwidth, the stall training paid, and the restore at start.
#include <algorithm>
#include <cstdio>

#include "app/report/report.h"
#include "common/stats.h"

namespace tp {
namespace {

using nlohmann::json;

// One save's figures: its parts, and what the user paid for it (docs/checkpoint.md).
json save_json(const CheckpointSave& s, bool async) {
  json save{{"step", s.step},
            {"bytes", s.bytes},
            {"write_gbps", s.write_gbps()},
            {"serialize_s", s.serialize_s},
            {"write_s", s.write_s},
            {"fsync_s", s.max_fsync_s},
            {"commit_s", s.commit_s},
            {"total_s", s.total_s},
            {"stall_s", s.stall_s}};
  if (async)
    save["time_to_durable_s"] = s.time_to_durable_s;
  else  // training waited for every byte: the bandwidth the user saw
    save["effective_gbps"] =
        s.stall_s > 0 ? json(double(s.bytes) / s.stall_s / 1e9) : json(nullptr);
  return save;
}

// The training between two saves: checkpoint.every steps without their checkpoint phase (the
// median step); null without steps.
json training_between_saves(const RunRecord& run) {
  std::vector<double> training;
  for (const auto& rank : run.timings)
    for (const auto& t : rank) training.push_back(t.step - t.checkpoint);
  const double between = double(run.config.checkpoint_every) * median(training);
  if (training.empty() || between <= 0) return nullptr;
  return between;
}

// The checkpoint overhead (docs/report.md, "Checkpoint overhead"): the share of training time
// that checkpoints take, the median stall over itself plus the training between two saves. At
// most 1; above 0.5 the saves take longer than the training between them. Null without saves.
json checkpoint_overhead(const std::vector<double>& stalls, const json& between) {
  if (stalls.empty() || !between.is_number()) return nullptr;
  const double stall = median(stalls);
  return stall / (stall + between.get<double>());
}

// An async save's writer thread needs a core beside the step's: without one they take turns.
std::string async_cpu_warning(const RunRecord& run) {
  if (!run.config.checkpoint_async || run.saves.empty()) return "";
  for (size_t r = 0; r < run.cpu_share.size(); ++r) {
    if (run.cpu_share[r] >= 2.0) continue;
    char text[512];
    std::snprintf(text, sizeof text,
                  "rank %zu has %.3g CPU(s) of its own (its affinity, shared with the ranks of "
                  "its host that may run there) for the step and the async checkpoint writer: "
                  "they take turns, so time_to_durable_s and the step time measure CPU, not "
                  "storage (give each rank 2 cores: srun --cpus-per-task=2, or mpirun --map-by "
                  "slot:PE=2 or --bind-to none)",
                  r, run.cpu_share[r]);
    return text;
  }
  return "";
}

}  // namespace

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
    c["saves"].push_back(save_json(s, cfg.checkpoint_async));
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
  c["training_between_s"] = training_between_saves(run);
  c["overhead"] = checkpoint_overhead(stalls, c["training_between_s"]);
  c["cpu_warning"] = async_cpu_warning(run);
  c["restore"] =
      run.restored
          ? json{{"step", run.restored->step},
                 {"folder", run.restored->folder},
                 {"bytes", run.restored->bytes},
                 {"seconds", run.restored->seconds},
                 {"restore_gbps", run.restored->gbps()},
                 {"rejected", run.restored->rejected},
                 {"damaged_replicas", run.restored->damaged_replicas},
                 // A restore at another world size says so (docs/checkpoint.md).
                 {"written_world_size", run.restored->written_world_size},
                 {"world_size", int(run.ranks.size())},
                 {"rank_restore_gbps",
                  {{"min", run.restored->rank_gbps_min}, {"max", run.restored->rank_gbps_max}}}}
          : json(nullptr);
  c["restore_gbps"] = run.restored ? json(run.restored->gbps()) : json(nullptr);
  return c;
}

}  // namespace tp
