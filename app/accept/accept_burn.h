#pragma once
// accept --level=full (docs/node-check.md, "In accept"): node-check --level=full's burn and
// copies on every node at once, inside the preflight, while the NVML watch the preflight started
// runs beside them. Each node's first rank burns and judges its GPUs against each other, as
// node-check does; rank 0 then judges every GPU against the job's median GPU, which no node can
// do alone, and the nodes it suspects burn again before a flag counts. Rank 0 receives one small
// record per node, so its work grows with the job alone.
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "mpi/world.h"
#include "node/gpu_health.h"
#include "node/inventory_spec.h"

namespace tp {

struct AcceptBurnSettings {
  double burn_s = 60;                    // health.burn_s
  const InventorySpec* rules = nullptr;  // the host file's [health] floors
  std::string sysfs_root = "/sys";
  bool every_pair_nvlink = false;  // this node's driver, at its first rank (the preflight's read)
};

// One device's figures (0: not measured).
struct BurnFigures {
  int gpu = -1;  // the CUDA device; -1: the CPU
  std::string uuid, pci_address;
  double gemm_tflops = 0, memory_gbps = 0, h2d_gbps = 0, d2h_gbps = 0;
};

// One node's burn, as its first rank measured and judged it.
struct NodeBurn {
  std::string host;         // "" on a rank that is not its node's first
  std::string backend;      // "cuda" or "cpu"
  std::string unavailable;  // why nothing burned
  std::vector<BurnFigures> devices;
  std::vector<HealthFinding> burn_findings, copy_findings;  // the node's own judgement
};
void to_json(nlohmann::json& j, const NodeBurn& n);
void from_json(const nlohmann::json& j, NodeBurn& n);

// Pure, on rank 0: each GPU against the job's median GPU, per figure (GEMM, device-memory copy,
// host-to-device, device-to-host). Only what the job adds: a flag against the best GPU of its own
// node is the node's, and a CPU figure (a host without a GPU driver) is recorded, not compared.
struct JobPeerFlags {
  std::vector<std::pair<std::string, HealthFinding>> burn, copies;  // (host, finding)
  std::vector<std::string> hosts;                                   // flagged, each once
};
JobPeerFlags judge_job_peers(const std::vector<NodeBurn>& nodes);

// Pure: each figure of `first` raised to the better of it and `again`'s for the same host and
// device, and the hosts' own findings taken from `again` (its second measurement decides).
void keep_better(std::vector<NodeBurn>& first, const std::vector<NodeBurn>& again);

struct BurnStage {
  nlohmann::json section;                                        // rank 0: preflight.burn
  nlohmann::json checks;                                         // rank 0: gpu_burn, gpu_copies
  std::vector<std::pair<std::string, nlohmann::json>> findings;  // rank 0: (host, finding)
};

// Every rank: burns on each node's first rank while the others wait (under a deadline), then
// again on the nodes rank 0 suspects. Rank 0 returns the judged stage.
BurnStage burn_stage(const AcceptBurnSettings& settings, const World& world);

}  // namespace tp
