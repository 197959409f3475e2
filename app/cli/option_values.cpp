#include "app/cli/option_values.h"

namespace tp {

namespace po = boost::program_options;

int64_t positive(const po::variables_map& vm, const char* name) {
  const int64_t value = vm[name].as<int64_t>();
  if (value <= 0)
    throw UsageError(std::string(name) + " must be positive, got " + std::to_string(value));
  return value;
}

int fits_int(int64_t value, const char* name) {
  if (value > int64_t(1) << 30)
    throw UsageError(std::string(name) + "=" + std::to_string(value) + " is too large");
  return static_cast<int>(value);
}

double in_range(const po::variables_map& vm, const char* name, double low, double high,
                bool low_open) {
  const double value = vm[name].as<double>();
  if (!(value >= low && value <= high) || (low_open && value == low))
    throw UsageError(std::string(name) + "=" + std::to_string(value) + " is out of range " +
                     (low_open ? "(" : "[") + std::to_string(low) + ", " + std::to_string(high) +
                     "]");
  return value;
}

std::string one_of(const po::variables_map& vm, const char* name,
                   std::initializer_list<const char*> allowed) {
  const std::string value = vm[name].as<std::string>();
  std::string list;
  for (const char* a : allowed) {
    if (value == a) return value;
    list += list.empty() ? a : std::string(", ") + a;
  }
  throw UsageError(std::string(name) + "='" + value + "' is not one of: " + list);
}

}  // namespace tp
