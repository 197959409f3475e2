#pragma once
// The training run's communication per bucket size (docs/report.md, train.buckets): each
// bucket's collective time across ranks, and the bus bandwidth it achieved, in nccl-tests' terms so
// it can be held against a sweep of the same fabric.
#include <nlohmann/json.hpp>
#include <vector>

#include "train/train_config.h"

namespace tp {

// `bucket_seconds[step][bucket]`: each bucket's time on the rank that started it last (the
// minimum over ranks: on any other rank the time includes waiting for that one). One entry per
// bucket size, largest first: bytes, how many buckets have it, time p50/min/max over steps and
// buckets, and algbw and busbw (2(n-1)/n of algbw) at the p50.
nlohmann::json bucket_sizes_json(const TrainConfig& config, int world_size,
                                 const std::vector<std::vector<double>>& bucket_seconds);

// Each bucket size's busbw as a fraction of a sweep's allreduce row in the same report: float32,
// in place, the same backend, the world group, at the nearest size not below the bucket's. The
// training run's communication efficiency; empty without both sections.
nlohmann::json comm_efficiency_json(const nlohmann::json& report);

}  // namespace tp
