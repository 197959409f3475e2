#pragma once
// Text that trainproof prints for an operator to paste into a shell (the drain and resume lines
// of `report nodes`, the command the summary names): every word quoted so that nothing in it, a
// host name, a reason or a path holding $(...), backticks or quotes, runs or splits.
#include <optional>
#include <string>
#include <string_view>

namespace tp {

// `text` as one shell word: as it is when it holds only letters, digits and /._-+:,=@%, else in
// single quotes (a quote inside as '\''). nullopt when it holds a control character (a newline
// would end the pasted line), which no quoting makes one line.
std::optional<std::string> shell_word(std::string_view text);

// `text` for a `#` comment line: each control character as '?', so a newline cannot end the
// comment and start a command.
std::string comment_text(std::string_view text);

}  // namespace tp
