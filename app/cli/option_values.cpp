#include "app/cli/option_values.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "common/number_text.h"
#include "common/sysinfo.h"

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

std::string run_id_option(const po::variables_map& vm) {
  const std::string id = vm["run_id"].as<std::string>();
  const bool allowed = std::all_of(id.begin(), id.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '.' || c == '_' || c == ':' || c == '-';
  });
  if (id.size() > 64 || !allowed)
    throw UsageError("run_id '" + id + "' must be 1 to 64 letters, digits, '.', '_', ':' or '-'");
  return id;
}

std::string run_id_for(const po::variables_map& vm, const std::string& start_time) {
  if (std::string given = run_id_option(vm); !given.empty()) return given;
  std::string made = start_time + "-" + host_name() + "-" + std::to_string(::getpid());
  for (char& c : made)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != ':' &&
        c != '-')
      c = '_';
  return made.substr(0, 64);
}

double in_range(const po::variables_map& vm, const char* name, double low, double high,
                bool low_open) {
  const double value = vm[name].as<double>();
  if (!(value >= low && value <= high) || (low_open && value == low))
    throw UsageError(std::string(name) + "=" + exact_number(value) + " is out of range " +
                     (low_open ? "(" : "[") + exact_number(low) + ", " + exact_number(high) + "]");
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

void set_test_linger(MpiCommand& command, const boost::program_options::variables_map& vm) {
  command.linger_rank = vm["test.linger_rank"].as<int>();
  command.linger_s = in_range(vm, "test.linger_s", 0, 600, false);
  command.crash_rank = vm["test.crash_rank"].as<int>();
  command.crash = one_of(vm, "test.crash", {"null_call", "uncaught_exception"});
}

}  // namespace tp
