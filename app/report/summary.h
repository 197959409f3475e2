#pragma once
// The human summary rank 0 prints, rendered from the JSON report alone, so `trainproof report FILE`
// reprints exactly what the run printed.
#include <nlohmann/json.hpp>
#include <string>

namespace tp {

std::string render_summary(const nlohmann::json& report, size_t slowest_ranks_shown = 5);

}  // namespace tp
