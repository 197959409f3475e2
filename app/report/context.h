#pragma once
// The report's context block: what ran, where, with which libraries and environment, and what in
// that environment makes its timings less trustworthy.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "app/cli/cli.h"
#include "checkpoint/folder_facts.h"
#include "gpu/gpu_api.h"
#include "mpi/world.h"
#include "train/train_config.h"

namespace tp {

// NCCL_*, OMPI_*, UCX_*, FI_* and SLURM_* variables and CUDA_VISIBLE_DEVICES, each value redacted
// by redact_variable (app/report/redact.h). `environment` holds NAME=VALUE entries.
nlohmann::json launcher_environment(const std::vector<std::string>& environment);
std::vector<std::string> process_environment();

std::string mpi_library_version();
// A run with a test hook measures the hook as much as the hardware (test.split_hosts makes one
// machine read as several hosts): "test hooks active (--test.x, ...): ...", or "" without one.
std::string test_hooks_warning(const boost::program_options::variables_map& options);
// `nvidia-smi topo -m` output, or null when nvidia-smi is not on PATH.
nlohmann::json nvidia_smi_topology();

// One host's GPUs, as report context entries.
// One host's GPUs from what each of its ranks sees (under per-task binding a rank sees only its
// own): the union by UUID, ordered by PCI bus id, without the ranks' own visible indices.
nlohmann::json merge_gpu_inventories(const std::vector<nlohmann::json>& seen_by_rank);
// The CUDA_* and NCCL_* variables that apply to the whole node (CUDA_VISIBLE_DEVICES is per rank,
// in ranks[].gpu), redacted.
nlohmann::json node_gpu_environment(const std::vector<std::string>& environment);
nlohmann::json gpu_inventory(const std::vector<GpuDevice>& devices, const std::string& host);
// "2.28.9" from NCCL's 22809, "13.0" from CUDA's 13000.
std::string nccl_version_string(int code);
std::string cuda_version_string(int code);
// The first line nvidia-smi prints for a --query-gpu, or "" without nvidia-smi.
std::string nvidia_smi_query(const std::string& fields);
// Warnings from `nvidia-smi --query-gpu=index,persistence_mode,clocks.applications.graphics,
// clocks.max.graphics --format=csv,noheader,nounits` output: persistence off, or application
// clocks below the maximum, make GPU timings vary from run to run.
std::vector<std::string> gpu_clock_warnings(const std::string& csv, const std::string& host);
std::string gpu_clock_query_output();

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

// The backends a run used, as the context block records them.
struct BackendFacts {
  std::string compute, comm;
  std::vector<std::string> notes;
  const GpuApi* gpu = nullptr;  // the loaded GPU library, when the run computed on a GPU
  int gpu_sharers = 1;
};

// Everything the context block is built from, on rank 0 after the run.
struct ContextInputs {
  const Invocation& invocation;
  const TrainConfig& config;
  const World& world;
  std::string start_time;
  BackendFacts backends;
  nlohmann::json gpus = nlohmann::json::array();  // every host's inventory
  std::vector<std::string> gpu_warnings;
  int64_t measured_steps = 0;
  std::optional<CheckpointFolderFacts> folder;
  // context.nodes[]: each node's topology and software stack (app/stages/topology_facts.h).
  nlohmann::json nodes = nlohmann::json::array();
  std::vector<std::string> setup_warnings;  // e.g. heartbeats some node cannot read
};
nlohmann::json build_context(const ContextInputs& in);

}  // namespace tp
