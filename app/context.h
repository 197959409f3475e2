#pragma once
// The report's context block: what ran, where, with which libraries and environment, and what in
// that environment makes its timings less trustworthy.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tp {

// NCCL_*, OMPI_*, UCX_*, FI_* and SLURM_* variables; values of names containing TOKEN, KEY,
// SECRET or PASSWORD are replaced by "<redacted>". `environment` holds NAME=VALUE entries.
nlohmann::json launcher_environment(const std::vector<std::string>& environment);
std::vector<std::string> process_environment();

std::string mpi_library_version();
// `nvidia-smi topo -m` output, or null when nvidia-smi is not on PATH.
nlohmann::json nvidia_smi_topology();

struct TimingEnvironment {
  int ranks_on_busiest_host = 1;
  unsigned cpus_on_host = 1;
  std::string cpu_governor;
  std::string build_type;
  bool sanitizers = false;
  int64_t measured_steps = 0;
};
// Conditions that make timings unreliable, as sentences for context.warnings.
std::vector<std::string> timing_warnings(const TimingEnvironment& env);

}  // namespace tp
