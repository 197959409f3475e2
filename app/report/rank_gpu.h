#pragma once
// Where each rank's GPU and NIC sit, as the report shows them (docs/report.md, ranks[].gpu and
// ranks[].nic): which devices it used, and whether they hang off the NUMA node of its CPUs and
// of each other.
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/report/report.h"

namespace tp {

// ranks[].gpu: null on the CPU backend.
nlohmann::json rank_gpu_json(const RankInfo& rank);

// ranks[].nic: null when no NIC could be named.
nlohmann::json rank_nic_json(const RankInfo& rank);

// The affinity findings of each host (check `affinity`, WARN): a rank whose GPU is attached to a
// NUMA node its CPU affinity does not touch (every host-device copy crosses the socket link), and
// a rank whose NIC is on another NUMA node than its GPU (its GPUDirect RDMA traffic does).
std::map<std::string, std::vector<std::string>> affinity_reasons(
    const std::vector<RankInfo>& ranks);

}  // namespace tp
