#include "common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace tp {

void init_logging(int rank, const std::string& host, const std::string& level) {
  auto logger = spdlog::stderr_color_mt("trainproof");
  const std::string who = rank < 0 ? host : "rank " + std::to_string(rank) + " " + host;
  logger->set_pattern("[%H:%M:%S.%e] [" + who + "] [%^%l%$] %v");
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
}

}  // namespace tp

namespace tp {
namespace {
std::string& identity_storage() {
  static std::string who = "rank ? on host " + std::string("?");
  return who;
}
}  // namespace

void set_identity(int rank, const std::string& host) {
  identity_storage() = "rank " + std::to_string(rank) + " on host " + host;
}
const std::string& identity() {
  return identity_storage();
}
}  // namespace tp
