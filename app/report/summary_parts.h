#pragma once
// The pieces of a printed summary that every report kind shares (app/report/summary.cpp renders a
// training run's, app/report/sweep_summary.cpp a sweep's).
#include <nlohmann/json.hpp>
#include <string>

#include "common/printf_text.h"

namespace tp {

// `value` with every string's controls and bytes that are not UTF-8 shown as visible escapes.
nlohmann::json visible(const nlohmann::json& value);
std::string flagged_nodes(const nlohmann::json& nodes);
std::string warning_lines(const nlohmann::json& warnings);
std::string check_lines(const nlohmann::json& checks);

}  // namespace tp
