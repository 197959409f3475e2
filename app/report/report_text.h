#pragma once
// Every string a report holds becomes valid UTF-8 before it is written, so no byte in a path, an
// environment value or a scenario file can lose the report of a run that completed
// (docs/report.md, "Text that is not UTF-8").
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tp {

// Where a JSON tree held text that is not UTF-8: JSON pointers (RFC 6901) into the escaped tree.
struct EscapedText {
  std::vector<std::string> strings;  // string values
  std::vector<std::string> keys;     // members whose name was escaped
};

// Escapes (common/text_safety.h) every string value and member name of `tree` that is not valid
// UTF-8, in place, and says where.
EscapedText escape_invalid_text(nlohmann::json& tree);

inline constexpr const char* kEscapedTextWarning = "not UTF-8: ";

// Makes `report` serialisable: escapes it, lists the escaped strings and names in
// context.escaped_strings and context.escaped_keys (added to lists already there, as a drill's
// report holds its final run's), and, when any was, says so in one context.warnings entry.
void make_report_text_valid(nlohmann::json& report);

// tree.dump(indent) with every string escaped first: it cannot throw on bytes.
std::string dump_escaped(nlohmann::json tree, int indent = -1);

}  // namespace tp
