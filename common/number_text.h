#pragma once
// A number in a message, written as the shortest text that reads back to exactly the same value
// (std::to_chars): 1e-09 stays 1e-09 rather than std::to_string's 0.000000, 1e300 stays 1e+300
// rather than 301 digits, and 1.0000000000000002 keeps its last digit.
#include <charconv>
#include <string>

namespace tp {

inline std::string exact_number(double value) {
  char text[32];
  const auto end = std::to_chars(text, text + sizeof text, value).ptr;
  return {text, end};
}

}  // namespace tp
