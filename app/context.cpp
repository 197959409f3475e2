#include "app/context.h"

#include <mpi.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <memory>

extern char** environ;

namespace tp {

nlohmann::json launcher_environment(const std::vector<std::string>& environment) {
  static const char* const kPrefixes[] = {"NCCL_", "OMPI_", "UCX_", "FI_", "SLURM_"};
  static const char* const kSecrets[] = {"TOKEN", "KEY", "SECRET", "PASSWORD"};
  nlohmann::json out = nlohmann::json::object();
  for (const std::string& entry : environment) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = entry.substr(0, eq);
    bool wanted = false;
    for (const char* prefix : kPrefixes) wanted = wanted || name.rfind(prefix, 0) == 0;
    if (!wanted) continue;
    std::string upper = name;
    for (char& ch : upper) ch = char(std::toupper(static_cast<unsigned char>(ch)));
    bool secret = false;
    for (const char* word : kSecrets) secret = secret || upper.find(word) != std::string::npos;
    out[name] = secret ? "<redacted>" : entry.substr(eq + 1);
  }
  return out;
}

std::vector<std::string> process_environment() {
  std::vector<std::string> entries;
  for (char** e = environ; e && *e; ++e) entries.emplace_back(*e);
  return entries;
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string version(text, length);
  const size_t newline = version.find_first_of("\r\n");
  if (newline != std::string::npos) version.resize(newline);
  while (!version.empty() && (version.back() == ',' || version.back() == ' ')) version.pop_back();
  return version;
}

nlohmann::json nvidia_smi_topology() {
  if (std::system("command -v nvidia-smi >/dev/null 2>&1") != 0) return nullptr;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen("nvidia-smi topo -m 2>&1", "r"), pclose);
  if (!pipe) return nullptr;
  std::string output;
  std::array<char, 4096> chunk;
  size_t n = 0;
  while ((n = std::fread(chunk.data(), 1, chunk.size(), pipe.get())) > 0)
    output.append(chunk.data(), n);
  return output;
}

std::vector<std::string> timing_warnings(const TimingEnvironment& env) {
  std::vector<std::string> warnings;
  if (env.ranks_on_busiest_host > int(env.cpus_on_host))
    warnings.push_back(std::to_string(env.ranks_on_busiest_host) + " ranks share " +
                       std::to_string(env.cpus_on_host) +
                       " CPUs on one host: ranks are time-sliced, so compute and skew figures "
                       "include scheduler noise");
  if (!env.cpu_governor.empty() && env.cpu_governor != "performance")
    warnings.push_back("CPU frequency governor is '" + env.cpu_governor +
                       "', not 'performance': clock ramps add noise");
  if (env.build_type != "Release" && env.build_type != "RelWithDebInfo")
    warnings.push_back("built as '" + env.build_type + "': timings are not representative");
  if (env.sanitizers) warnings.push_back("built with sanitizers: timings are not representative");
  if (env.measured_steps < 10)
    warnings.push_back("only " + std::to_string(env.measured_steps) +
                       " measured steps: percentiles rest on few samples");
  return warnings;
}

}  // namespace tp
