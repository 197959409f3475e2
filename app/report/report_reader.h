#pragma once
// The one reader of a report file, for `trainproof report`, `report compare`, `report merge` and
// --baseline (docs/report.md, "Reading a report back"). What it returns, every reader can use:
// a regular file, at most kMaxJsonDepth levels deep, valid JSON, a known schema, a verdict, and
// every field that the summary reads of the type it reads. Anything else is a UsageError (exit 2)
// that names `role` ("report", "--baseline"), the file and, for a field of the wrong type, the
// field as a JSON pointer.
#include <nlohmann/json.hpp>
#include <string>

namespace tp {

nlohmann::json read_report_file(const std::string& path, const std::string& role);

// A nlohmann exception's text without its "[json.exception.type_error.304] " prefix.
std::string json_error_text(const nlohmann::json::exception& e);

}  // namespace tp
