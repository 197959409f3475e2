#pragma once
// Text that goes into JSON must be UTF-8. Paths, environment values and scenario files are bytes
// that need not be: each byte that is not part of a valid UTF-8 sequence is written as \xHH (two
// upper-case hex digits) and each backslash as \\, so the escaped text is valid UTF-8 and names
// the original bytes exactly (docs/report.md, "Text that is not UTF-8").
#include <cstddef>
#include <string>
#include <string_view>

namespace tp {

// Length of the valid UTF-8 sequence that starts at text[at], or 0 when none does.
size_t utf8_sequence_length(std::string_view text, size_t at);

// True when `text` is valid UTF-8 (RFC 3629: no overlong forms, surrogates or code points past
// U+10FFFF), as a JSON serialiser requires.
bool valid_utf8(std::string_view text);

// `text` with every byte outside a valid UTF-8 sequence as \xHH and every backslash as \\.
// Meant for text that is not valid UTF-8; valid text is best left as it is.
std::string escape_invalid_utf8(std::string_view text);

// The bytes escape_invalid_utf8 was given: \\ and \xHH decoded, everything else kept.
std::string unescape_invalid_utf8(std::string_view escaped);

}  // namespace tp
