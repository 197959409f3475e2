#include "common/number_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tp {

std::string readable_number(double value, int digits) {
  if (!std::isfinite(value)) return "n/a";
  char text[64];
  if (std::fabs(value) >= 1000) {
    std::snprintf(text, sizeof text, "%.0f", value);
    return text;
  }
  if (value == 0) return "0";
  // Decimals that keep `digits` significant ones; up to 12, so even 1e-12 shows its first digit.
  const int magnitude = int(std::floor(std::log10(std::fabs(value))));
  const int decimals = std::clamp(digits - 1 - magnitude, 0, 12);
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  std::string out = text;
  if (out.find('.') != std::string::npos) {
    out.erase(out.find_last_not_of('0') + 1);
    if (out.back() == '.') out.pop_back();
  }
  return out == "-0" ? "0" : out;
}

std::string readable_percent(double fraction) {
  if (!std::isfinite(fraction)) return "n/a";
  const double percent = 100 * fraction;
  // A share too small to read in a percentage says so rather than printing 0% or 0.00034%.
  if (percent != 0 && std::fabs(percent) < 0.1) return percent > 0 ? "<0.1%" : ">-0.1%";
  // Two significant digits below 10%, whole percents above: 0.42%, 4.2%, 42%, 170%.
  return (std::fabs(percent) >= 10 ? readable_number(std::round(percent))
                                   : readable_number(percent, 2)) +
         "%";
}

}  // namespace tp
