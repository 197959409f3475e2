#pragma once
// Numbers in text. exact_number is for a value a program may read back: the shortest text that
// reads back to exactly the same value (std::to_chars): 1e-09 stays 1e-09 rather than
// std::to_string's 0.000000, 1e300 stays 1e+300 rather than 301 digits, and 1.0000000000000002
// keeps its last digit. readable_number and readable_percent are for a person (summaries,
// reasons): never in e-notation.
#include <charconv>
#include <string>

namespace tp {

inline std::string exact_number(double value) {
  char text[32];
  const auto end = std::to_chars(text, text + sizeof text, value).ptr;
  return {text, end};
}

// `digits` significant digits in fixed notation, trailing zeros dropped (0.00926, 12.5, 0.5);
// whole numbers from 1,000 up (18000, not 1.8e+04); "n/a" for a value that is not finite.
std::string readable_number(double value, int digits = 3);

// A share as a percentage with sensible digits: 42%, 4.2%, 0.42%; <0.1% for a share above 0 too
// small to read as a percentage; 0%; 17000%.
std::string readable_percent(double fraction);

}  // namespace tp
