#pragma once
// The pairwise matrix in the text summary, readable at any node count: the whole matrix up to
// kNodesInFullMatrix nodes, above that the slowest pairs and the median (the full matrix stays in
// the report, and `trainproof report plot` draws it). docs/sweep.md, "Reading the matrix".
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

}  // namespace tp
