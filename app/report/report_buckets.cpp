#include "app/report/report_buckets.h"

#include <algorithm>
#include <map>

#include "common/stats.h"
#include "fabric/bus_bandwidth.h"
#include "train/bucket_plan.h"

namespace tp {

using nlohmann::json;

json bucket_sizes_json(const TrainConfig& cfg, int world_size,
                       const std::vector<std::vector<double>>& bucket_seconds) {
  const std::vector<Bucket> plan =
      plan_buckets(cfg.model.layers, size_t(cfg.model.hidden) * cfg.model.hidden, cfg.bucket_mb);
  std::map<uint64_t, std::vector<double>, std::greater<>> times_of_size;
  std::map<uint64_t, int> buckets_of_size;
  for (const Bucket& b : plan) ++buckets_of_size[b.count * sizeof(float)];
  for (const std::vector<double>& step : bucket_seconds)
    for (size_t i = 0; i < step.size() && i < plan.size(); ++i)
      times_of_size[plan[i].count * sizeof(float)].push_back(step[i]);
  json sizes = json::array();
  for (const auto& [bytes, times] : times_of_size) {
    const Summary s = summarize(times);
    sizes.push_back(
        {{"bytes", bytes},
         {"buckets", buckets_of_size[bytes]},
         {"time_s", {{"p50", s.p50}, {"min", s.min}, {"max", s.max}}},
         {"algbw_gbps", algbw_gbps(bytes, s.p50)},
         {"busbw_gbps", busbw_gbps(CollectiveOp::allreduce, world_size, bytes, s.p50)}});
  }
  return sizes;
}

namespace {

// The sweep's comparable row for a bucket of `bytes`, or nullptr.
const json* sweep_row_for(const json& sweep, uint64_t bytes) {
  const json* best = nullptr;
  if (!sweep.contains("results")) return best;
  for (const json& row : sweep.at("results")) {
    if (row.value("group", "") != "world" || row.value("op", "") != "allreduce" ||
        row.value("dtype", "") != "float32" || !row.value("in_place", false) ||
        !row.value("not_run", std::string()).empty() || row.value("bytes", uint64_t(0)) < bytes)
      continue;
    if (!best || row["bytes"].get<uint64_t>() < (*best)["bytes"].get<uint64_t>()) best = &row;
  }
  return best;
}

}  // namespace

json comm_efficiency_json(const json& report) {
  json rows = json::array();
  if (!report.contains("train") || !report.contains("sweep")) return rows;
  const json& sweep = report["sweep"];
  const std::string backend = report["context"]["backends"].value("comm", "");
  if (sweep.value("backend", "") != backend || sweep.value("split", "none") != "none") return rows;
  if (!report["train"].contains("buckets")) return rows;
  for (const json& size : report["train"]["buckets"]) {
    const uint64_t bytes = size["bytes"];
    const json* row = sweep_row_for(sweep, bytes);
    if (!row) continue;
    const double reference = (*row)["busbw_gbps"];
    const double achieved = size["busbw_gbps"];
    rows.push_back({{"bytes", bytes},
                    {"busbw_gbps", achieved},
                    {"sweep_bytes", (*row)["bytes"]},
                    {"sweep_busbw_gbps", reference},
                    {"efficiency", reference > 0 ? achieved / reference : 0.0}});
  }
  return rows;
}

}  // namespace tp
