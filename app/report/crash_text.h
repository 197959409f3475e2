#pragma once
// `trainproof report` of a crash record (crash-rank<R>.json, common/crash_report.h) or of a
// folder holding them (the heartbeat folder of a crashed run): what crashed, where, and the
// stack with its names demangled (docs/crash-report.md, "Reading a crash record").
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tp {

// True when `path` is a crash record or a folder that holds at least one.
bool is_crash_evidence(const std::string& path);

// The records at `path` (a record, or every crash-rank*.json in a folder, by rank). A record that
// is not one (bad JSON, another format, a field of the wrong type) is a UsageError naming it.
std::vector<nlohmann::json> read_crash_records(const std::string& path);

// One block per record, at most `full` of them with their stacks; the rest as one line each, so
// thousands of crashed ranks stay a page.
std::string render_crash_records(const std::vector<nlohmann::json>& records, size_t full = 4);

// A mangled C++ name demangled; the name itself when it is not one.
std::string demangled(const std::string& name);

}  // namespace tp
