#pragma once
// The pieces of a printed summary that every report kind shares (app/summary.cpp renders a
// training run's, app/sweep_summary.cpp a sweep's).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace tp {

// printf into a string, for one line of a summary (at most 511 bytes).
template <class... Args>
std::string summary_text(const char* fmt, Args... args) {
  char text[512];
  std::snprintf(text, sizeof text, fmt, args...);
  return text;
}

// `value` with every string's controls and bytes that are not UTF-8 shown as visible escapes.
nlohmann::json visible(const nlohmann::json& value);
std::string flagged_nodes(const nlohmann::json& nodes);
std::string warning_lines(const nlohmann::json& warnings);
std::string check_lines(const nlohmann::json& checks);

}  // namespace tp
