#include "app/report/context.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <memory>

#include "app/cli/build_info.h"
#include "app/cli/option_values.h"
#include "common/hdf5_info.h"
#include "common/redact.h"
#include "common/sysinfo.h"
#include "kernels/cpu_backend.h"

extern char** environ;

namespace tp {

namespace {
// The NAME=VALUE entries whose name `wanted` accepts, as an object of redacted values.
template <class Wanted>
nlohmann::json variables_where(const std::vector<std::string>& environment, Wanted wanted) {
  nlohmann::json out = nlohmann::json::object();
  for (const std::string& entry : environment) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = entry.substr(0, eq);
    if (wanted(name)) out[name] = redact_variable(name, entry.substr(eq + 1));
  }
  return out;
}
bool starts_with_any(const std::string& name, std::initializer_list<const char*> prefixes) {
  for (const char* prefix : prefixes)
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}
}  // namespace

nlohmann::json launcher_environment(const std::vector<std::string>& environment) {
  return variables_where(environment, [](const std::string& name) {
    return name == "CUDA_VISIBLE_DEVICES" ||
           starts_with_any(name, {"NCCL_", "OMPI_", "UCX_", "FI_", "SLURM_"});
  });
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
  // Open MPI counts the terminating NUL in the length it returns.
  while (!version.empty() &&
         (version.back() == ',' || version.back() == ' ' || version.back() == '\0'))
    version.pop_back();
  return version;
}

nlohmann::json merge_gpu_inventories(const std::vector<nlohmann::json>& seen_by_rank) {
  std::map<std::string, nlohmann::json> by_uuid;
  for (const nlohmann::json& seen : seen_by_rank)
    for (nlohmann::json gpu : seen) {
      gpu.erase("index");
      by_uuid.emplace(gpu.value("uuid", ""), std::move(gpu));
    }
  std::vector<nlohmann::json> gpus;
  for (auto& [uuid, gpu] : by_uuid) gpus.push_back(std::move(gpu));
  std::stable_sort(gpus.begin(), gpus.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a.value("pci_bus_id", "") < b.value("pci_bus_id", "");
  });
  return gpus;
}

nlohmann::json node_gpu_environment(const std::vector<std::string>& environment) {
  return variables_where(environment, [](const std::string& name) {
    return name != "CUDA_VISIBLE_DEVICES" && starts_with_any(name, {"CUDA_", "NCCL_"});
  });
}

nlohmann::json gpu_inventory(const std::vector<GpuDevice>& devices, const std::string& host) {
  nlohmann::json out = nlohmann::json::array();
  for (const GpuDevice& d : devices)
    out.push_back({{"host", host},
                   {"index", d.index},
                   {"name", d.name},
                   {"uuid", d.uuid},
                   {"pci_bus_id", d.pci_bus_id},
                   {"memory_bytes", d.memory_bytes},
                   {"sm_count", d.sm_count},
                   {"compute_capability", d.compute_capability},
                   {"compute_mode", d.compute_mode},
                   {"max_sm_clock_mhz", d.sm_clock_mhz},
                   {"max_memory_clock_mhz", d.memory_clock_mhz}});
  return out;
}

std::string nccl_version_string(int code) {
  if (code <= 0) return "";
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
  return std::to_string(code / 10000) + "." + std::to_string(code % 10000 / 100) + "." +
         std::to_string(code % 100);
}

std::string cuda_version_string(int code) {
  if (code <= 0) return "";
  return std::to_string(code / 1000) + "." + std::to_string(code % 1000 / 10);
}

namespace {
std::string run_command(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return "";
  std::string output;
  std::array<char, 4096> chunk;
  size_t n = 0;
  while ((n = std::fread(chunk.data(), 1, chunk.size(), pipe.get())) > 0)
    output.append(chunk.data(), n);
  return output;
}
bool have_nvidia_smi() {
  return std::system("command -v nvidia-smi >/dev/null 2>&1") == 0;
}
std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t at = text.find(separator, start);
    std::string part = text.substr(start, at == std::string::npos ? std::string::npos : at - start);
    while (!part.empty() && std::isspace(static_cast<unsigned char>(part.front())))
      part.erase(0, 1);
    while (!part.empty() && std::isspace(static_cast<unsigned char>(part.back()))) part.pop_back();
    parts.push_back(part);
    if (at == std::string::npos) return parts;
    start = at + 1;
  }
}
}  // namespace

nlohmann::json nvidia_smi_topology() {
  if (!have_nvidia_smi()) return nullptr;
  return run_command("nvidia-smi topo -m 2>&1");
}

std::string nvidia_smi_query(const std::string& fields) {
  if (!have_nvidia_smi()) return "";
  const std::string out = run_command("nvidia-smi --query-gpu=" + fields +
                                      " --format=csv,noheader,nounits 2>/dev/null");
  return split(out, '\n').front();
}

std::string gpu_clock_query_output() {
  if (!have_nvidia_smi()) return "";
  return run_command(
      "nvidia-smi --query-gpu=index,persistence_mode,clocks.applications.graphics,"
      "clocks.max.graphics --format=csv,noheader,nounits 2>/dev/null");
}

std::vector<std::string> gpu_clock_warnings(const std::string& csv, const std::string& host) {
  std::vector<std::string> warnings;
  for (const std::string& line : split(csv, '\n')) {
    const auto f = split(line, ',');
    if (f.size() < 4) continue;
    const std::string gpu = "GPU " + f[0] + " on " + host;
    if (f[1] == "Disabled")
      warnings.push_back(gpu +
                         ": persistence mode is off, so the driver may re-initialise the "
                         "GPU between runs and first steps are slower");
    try {
      const int application = std::stoi(f[2]), maximum = std::stoi(f[3]);
      if (application < maximum)
        warnings.push_back(gpu + ": application clock " + f[2] + " MHz is below the maximum " +
                           f[3] + " MHz");
    } catch (const std::exception&) {
      // "[N/A]" where the driver does not report clocks: nothing to compare.
    }
  }
  return warnings;
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

namespace tp {
namespace {

using nlohmann::json;

json tool_and_build(const BackendFacts& backends) {
  return {{"tool",
           {{"name", "trainproof"},
            {"version", build::kVersion},
            {"git_revision", build::kGitRevision}}},
          {"build",
           {{"type", build::kBuildType},
            {"sanitizers", build::kSanitizers},
            {"gpu_toolchain_found", build::kGpuToolchainFound},
            {"gpu_backend_built", build::kGpuBackendBuilt},
            {"gpu_backend_loaded", backends.gpu != nullptr}}}};
}

json versions(const BackendFacts& backends) {
  json v = {{"mpi", mpi_library_version()},  {"nccl", nullptr},   {"cuda", nullptr},
            {"cuda_driver_api", nullptr},    {"driver", nullptr}, {"hdf5", hdf5_version()},
            {"openblas", openblas_version()}};
  if (backends.gpu) {
    const GpuVersions gpu = backends.gpu->versions();
    v["nccl"] = nccl_version_string(gpu.nccl);
    v["cuda"] = cuda_version_string(gpu.cuda_runtime);
    v["cuda_driver_api"] = cuda_version_string(gpu.cuda_driver);
    const std::string driver = nvidia_smi_query("driver_version");
    if (!driver.empty()) v["driver"] = driver;
  }
  return v;
}

json nccl_settings(const BackendFacts& backends) {
  if (backends.comm != "nccl") return nullptr;
  auto env_or = [](const char* name) {
    const char* value = std::getenv(name);
    return std::string(value ? value
                             : "chosen per call by NCCL's tuner (not exposed by its API; "
                               "NCCL_DEBUG=INFO logs it)");
  };
  return {{"algorithm", env_or("NCCL_ALGO")}, {"protocol", env_or("NCCL_PROTO")}};
}

json checkpoint_filesystem(const std::optional<CheckpointFolderFacts>& folder) {
  if (!folder) return nullptr;
  return {{"path", std::filesystem::absolute(folder->path).string()},
          {"type", folder->filesystem},
          {"node_local", node_local_filesystem(folder->filesystem)}};
}

std::vector<std::string> context_warnings(const ContextInputs& in, int busiest) {
  // CPU oversubscription matters only where the CPU computes.
  const int cpu_busiest = in.backends.gpu ? 1 : busiest;
  std::vector<std::string> warnings =
      timing_warnings({cpu_busiest, online_cpus(), cpu_governor(), build::kBuildType,
                       build::kSanitizers, in.measured_steps});
  warnings.insert(warnings.end(), in.gpu_warnings.begin(), in.gpu_warnings.end());
  warnings.insert(warnings.end(), in.setup_warnings.begin(), in.setup_warnings.end());
  if (in.folder) {
    const auto folder = checkpoint_folder_warnings(*in.folder, int(in.world.hosts.size()));
    warnings.insert(warnings.end(), folder.begin(), folder.end());
  }
  if (const std::string hooks = test_hooks_warning(in.invocation.options); !hooks.empty())
    warnings.push_back(hooks);
  if (in.backends.gpu && in.backends.gpu_sharers > 1)
    warnings.push_back(std::to_string(in.backends.gpu_sharers) +
                       " ranks share one GPU: they time-slice it, so compute figures are not a "
                       "single rank's");
  return warnings;
}

}  // namespace

std::string test_hooks_warning(const boost::program_options::variables_map& options) {
  std::string hooks;
  for (const auto& [name, value] : options)
    if (name.rfind("test.", 0) == 0 && !value.defaulted())
      hooks += (hooks.empty() ? "--" : ", --") + name;
  if (hooks.empty()) return "";
  return "test hooks active (" + hooks +
         "): this run is the test suite's, not a measurement of the hardware as it stands";
}

json build_context(const ContextInputs& in) {
  const Invocation& inv = in.invocation;
  json ctx = tool_and_build(in.backends);
  ctx["run_id"] = run_id_for(inv.options, in.start_time);
  ctx["start_time"] = in.start_time;
  ctx["end_time"] = utc_timestamp();
  ctx["command_line"] = redact_argv(inv.argv);
  ctx["scenario_file"] = inv.scenario_path.empty() ? json(nullptr) : json(inv.scenario_path);
  ctx["scenario_text"] =
      inv.scenario_text.empty() ? json(nullptr) : json(redact_text(inv.scenario_text));
  ctx["scenario_hash"] = scenario_hash(in.config);
  ctx["options"] = redact_options(effective_options(inv.options));
  ctx["world_size"] = in.world.size;
  ctx["hosts"] = in.world.hosts;
  json per_host = json::object();
  int busiest = 0;
  for (const auto& h : in.world.hosts) {
    per_host[h] = in.world.ranks_on(h);
    busiest = std::max(busiest, in.world.ranks_on(h));
  }
  ctx["ranks_per_host"] = per_host;
  ctx["versions"] = versions(in.backends);
  ctx["gpus"] = in.gpus;
  ctx["nccl"] = nccl_settings(in.backends);
  ctx["nodes"] = in.nodes;  // each with its own nvidia_smi_topo
  ctx["environment"] = launcher_environment(process_environment());
  ctx["checkpoint_filesystem"] = checkpoint_filesystem(in.folder);
  ctx["backends"] = {{"compute", in.backends.compute},
                     {"comm", in.backends.comm},
                     {"compute_requested", in.config.compute_backend},
                     {"comm_requested", in.config.comm_backend},
                     {"notes", in.backends.notes}};
  ctx["warnings"] = context_warnings(in, busiest);
  return ctx;
}

}  // namespace tp
