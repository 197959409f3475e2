#pragma once
// Which GPU each rank of a node drives (README, "GPUs: CUDA and NCCL"). One deterministic rule,
// the same on every rank, that follows the launcher's binding instead of a modulo over local ranks:
// under `srun --gpu-bind=closest` each rank sees only its socket's GPUs, and `local_rank % visible`
// then sends local ranks 0 and 4 to the same GPU while others sit idle.
#include <string>
#include <vector>

namespace tp {

// What one local rank of a node sees: its visible GPUs in CUDA's order (their UUIDs and the CPUs
// each is attached to, sysfs local_cpulist) and the CPUs it may run on.
struct RankGpuView {
  std::vector<std::string> uuids;
  std::vector<std::vector<int>> gpu_cpus;  // [visible index]
  std::vector<int> affinity;
};

struct GpuChoice {
  int visible_index = -1;  // into the rank's own visible list; -1 when it sees none
  bool cpu_local = false;  // the GPU is attached to CPUs the rank may run on
};

// The rule: local ranks that see the same set of UUIDs form a group. In local-rank order, each
// takes the lowest-numbered unclaimed GPU of its list whose CPUs overlap its affinity, else the
// lowest-numbered unclaimed one. When every GPU of the group is claimed (more ranks than GPUs),
// the claims start over, so the GPUs are shared evenly. Nothing depends on timing.
std::vector<GpuChoice> assign_gpus(const std::vector<RankGpuView>& local_ranks);

}  // namespace tp
