#pragma once
// Reading one option's value with its check: every failure is a UsageError that names the option
// and the value (docs/report.md, "Exit codes").
#include <boost/program_options.hpp>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "app/cli/mpi_command.h"
#include "common/errors.h"

namespace tp {

int64_t positive(const boost::program_options::variables_map& vm, const char* name);
int fits_int(int64_t value, const char* name);
// Within [low, high], or (low, high] when `low_open`.
// --run_id, checked: empty (a default is made when the report is written) or 1 to 64 of
// [A-Za-z0-9._:-], so that it is safe in a file name, a shell word and a grep pattern.
std::string run_id_option(const boost::program_options::variables_map& vm);

// The run's id: --run_id, or one made from the start time, this host and this process id.
std::string run_id_for(const boost::program_options::variables_map& vm,
                       const std::string& start_time);

// test.linger_rank, test.linger_s, test.crash_rank and test.crash into `command`.
void set_test_linger(MpiCommand& command, const boost::program_options::variables_map& vm);

double in_range(const boost::program_options::variables_map& vm, const char* name, double low,
                double high, bool low_open);
std::string one_of(const boost::program_options::variables_map& vm, const char* name,
                   std::initializer_list<const char*> allowed);

// An integer option (int or int64_t) within [low, high]; the error names both bounds.
template <typename T>
T bounded(const boost::program_options::variables_map& vm, const char* name, T low, T high,
          const char* what) {
  const T value = vm[name].as<T>();
  if (value < low || value > high)
    throw UsageError(std::string(name) + "=" + std::to_string(value) + " is out of range [" +
                     std::to_string(low) + ", " + std::to_string(high) + "] (" + what + ")");
  return value;
}

}  // namespace tp
