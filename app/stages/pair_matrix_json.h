#pragma once
// A rail's pairwise matrices in the report, sized for 512 nodes (docs/report.md, "A sweep's
// report"): whole up to kNodesInReportMatrix nodes; above that the report keeps, per mode, the
// median, every node's median send and receive figure and the slowest pairs, and the whole
// matrix goes to the trace (pairwise/rail<k>/one_way_gbps, both_ways_gbps). At 512 nodes and 8
// rails the matrices alone would be 4 million numbers, about 40 MB of JSON at rank 0.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fabric/pair_judgement.h"

namespace tp {

inline constexpr size_t kNodesInReportMatrix = 64;
inline constexpr size_t kSlowestPairsKept = 32;

// The matrix itself (null cells where not measured) up to kNodesInReportMatrix nodes, else null.
nlohmann::json report_matrix(const PairMatrix& m);

// {median_gbps, pairs, slowest: [{from, to, gbps}] (the kSlowestPairsKept lowest), nodes:
// [{host, send_median_gbps, receive_median_gbps}]}. O(nodes^2).
nlohmann::json matrix_summary(const PairMatrix& m, const std::vector<std::string>& hosts);

}  // namespace tp
