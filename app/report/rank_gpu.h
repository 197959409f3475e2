#pragma once
// Where each rank's GPU sits, as the report shows it (docs/report.md, ranks[].gpu): which device
// it drove, and whether that device hangs off the NUMA node the rank's CPUs belong to.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/report/report.h"

namespace tp {

// ranks[].gpu: null on the CPU backend.
nlohmann::json rank_gpu_json(const RankInfo& rank);

// One warning per rank whose GPU is attached to a NUMA node its CPU affinity does not touch:
// every host-device copy of that rank then crosses the socket link.
std::vector<std::string> gpu_numa_warnings(const std::vector<RankInfo>& ranks);

}  // namespace tp
