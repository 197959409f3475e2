#pragma once
// printf into a string: one line of human text (a summary line, a table cell) with its numbers
// formatted as printf formats them.
#include <cstdio>
#include <string>

namespace tp {

// At most 511 bytes; a longer line is cut there.
template <class... Args>
std::string printf_text(const char* fmt, Args... args) {
  char text[512];
  std::snprintf(text, sizeof text, fmt, args...);
  return text;
}

}  // namespace tp
