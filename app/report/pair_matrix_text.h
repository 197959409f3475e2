#pragma once
// The pairwise matrix in the text summary, readable at any node count: the whole matrix up to
// kNodesInFullMatrix nodes, above that the slowest pairs and the median (the full matrix is in
// the report up to 64 nodes, else in the trace, and `trainproof report plot` draws it).
// docs/sweep.md, "Reading the matrix".
#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace tp {

inline constexpr size_t kNodesInFullMatrix = 16;
inline constexpr size_t kSlowestPairsListed = 10;

// The narrowest width, at least `at_least`, at which the names cut to it are still all distinct
// (the longest name's length when only that keeps them apart).
size_t distinct_width(const std::vector<std::string>& names, size_t at_least);

// `title`'s matrix in GB/s (row sends to column; null cells are the diagonal or not measured).
std::string pair_matrix_text(const nlohmann::json& hosts, const nlohmann::json& matrix,
                             const std::string& title);

// Where a large rail's matrix is in the trace (`in_trace`, its group there): the slowest pairs
// and the median from the report's summary of it (app/stages/pair_matrix_json.h).
std::string slowest_pairs_text(const nlohmann::json& hosts, const nlohmann::json& summary,
                               const std::string& title, const nlohmann::json& in_trace);

}  // namespace tp
