#pragma once
// Logging: every line is prefixed with the rank and host, so interleaved output from many ranks
// can still be attributed.
#include <spdlog/spdlog.h>

#include <string>

namespace tp {

// Installs the default logger. Before MPI is up the rank is unknown and passed as -1.
void init_logging(int rank, const std::string& host, const std::string& level);

}  // namespace tp

namespace tp {
// "rank R on host H", for error messages raised anywhere in the process. Set once MPI is up.
void set_identity(int rank, const std::string& host);
const std::string& identity();
}  // namespace tp
