#include "app/report/shell_text.h"

#include <cctype>

namespace tp {
namespace {

bool control(unsigned char c) {
  return c < 0x20 || c == 0x7f;
}

}  // namespace

std::optional<std::string> shell_word(std::string_view text) {
  bool plain = !text.empty();
  for (unsigned char c : text) {
    if (control(c)) return std::nullopt;
    plain = plain && (std::isalnum(c) != 0 ||
                      std::string_view("/._-+:,=@%").find(char(c)) != std::string_view::npos);
  }
  if (plain) return std::string(text);
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string comment_text(std::string_view text) {
  std::string out;
  for (unsigned char c : text) out += control(c) ? '?' : char(c);
  return out;
}

}  // namespace tp
