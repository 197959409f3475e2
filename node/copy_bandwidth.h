#pragma once
// node-check --level=full's memory and copy bandwidth (docs/node-check.md, "Memory and copies"):
// each GPU's device-memory copy rate and its host-to-device and device-to-host rates from pinned
// memory on its own NUMA node, every GPU at once as a data loader drives them, then the copy rate
// of every ordered pair of GPUs over their peer path, one pair at a time. Each figure is judged
// against the GPU's peers (node/gpu_peers.h) and a suspect measured again before it counts. A
// host without an NVIDIA driver measures its own memory copy rate through the same path.
#include <string>
#include <vector>

#include "node/gpu_health.h"
#include "node/gpu_peers.h"
#include "node/inventory_spec.h"

namespace tp {

struct CopyDevice {
  int gpu = -1;  // -1: the CPU
  std::string uuid, pci_address;
  std::string cpus;  // the CPUs its host copies ran on ("" when not placed)
  double device_gbps = 0, h2d_gbps = 0, d2h_gbps = 0;  // h2d and d2h: 0 on the CPU
  std::string error;
};

struct PeerCopy {
  int source = 0, destination = 0;
  double gbps = 0;  // 0: no peer path
};

// The host file's absolute floors, GB/s ([health] min_*_gbps; 0: none): a figure below its floor
// fails whatever its peers measured.
struct CopyFloors {
  double device = 0, h2d = 0, d2h = 0, peer = 0;
};

struct CopyRecord {
  std::string backend;      // "cuda" or "cpu"
  std::string unavailable;  // why nothing was measured
  double seconds = 0;       // of each measurement
  std::vector<CopyDevice> devices;
  std::vector<PeerCopy> pairs;
  // Every pair runs over one kind of path (an NVSwitch baseboard: the driver reports NVLink
  // between every pair, or the host file states nvlinks_per_gpu), so the pairs are judged
  // against each other; else only recorded.
  bool pairs_alike = false;
  CopyFloors floors;
  std::vector<HealthFinding> findings;  // slow figures, failed devices, missing peer paths
};

struct CopyOptions {
  double seconds = 0.5;      // each device figure; a pair gets an eighth
  bool pairs_alike = false;  // CopyRecord::pairs_alike
  CopyFloors floors;
  std::string sysfs_root = "/sys";
  PeerRules rules;
};

CopyRecord run_copy_bandwidth(const std::string& host, const CopyOptions& options);

// Pure: the findings of measured devices and pairs (with their confirmations applied), each
// figure judged by `rules` with the record's floor for it.
std::vector<HealthFinding> judge_copies(const std::string& host, const CopyRecord& record,
                                        const PeerRules& rules);

// The copies' settings from health.burn_s (each figure measured for burn_s/60 s, 0.1 to 1) and
// the host file's [health] floors (`rules` may be null: none). The pairs are judged against each
// other where the driver reports NVLink between every pair (DriverView::every_pair_nvlink) or
// the host file states nvlinks_per_gpu.
CopyOptions copy_options_of(double burn_s, const InventorySpec* rules,
                            const std::string& sysfs_root, bool every_pair_nvlink);

}  // namespace tp
