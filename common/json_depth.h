#pragma once
// A bound on how deeply a JSON file that the project reads may nest its arrays and objects. The
// code that walks a parsed document (the summary, redaction, dump) recurses once per level, so a
// hostile file of 50,000 levels would overflow the stack; a real report nests fewer than 20.
// Every JSON read from a file is checked before it is parsed (docs/promises.md).
#include <string>
#include <string_view>

namespace tp {

inline constexpr int kMaxJsonDepth = 256;

// "" when `text` nests at most kMaxJsonDepth levels deep, else why not. Brackets inside strings
// do not count; the text need not be valid JSON (the parser says what else is wrong with it).
std::string json_depth_problem(std::string_view text);

}  // namespace tp
