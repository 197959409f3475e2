#pragma once
// node-check --level=full's burn (docs/node-check.md, "The burn"): a large GEMM on every GPU at
// once, one thread per GPU, for `seconds`, long enough for each GPU to reach its thermal and
// power steady state, so the NVML watch running beside it sees the throttles and links a busy
// GPU shows. A host without an NVIDIA driver burns one CPU GEMM instead, so the same path runs
// everywhere. Each device's figure is the median rate of the burn's second half (steady state),
// judged against its peers (node/gpu_peers.h); a suspect is measured again before it counts.
#include <functional>
#include <string>
#include <vector>

#include "node/gpu_health.h"
#include "node/gpu_peers.h"
#include "node/inventory_spec.h"

namespace tp {

struct BurnDevice {
  int gpu = -1;  // the CUDA device; -1: the CPU
  std::string name, uuid, pci_address;
  std::vector<double> rates;  // FLOP/s of each measurement, in order
  double figure = 0;          // FLOP/s: the median of the second half's
  double confirmed = -1;      // FLOP/s of the second measurement, for a suspect; -1 none
  std::string error;          // why this device could not burn
};

struct BurnRecord {
  std::string backend;  // "cuda" or "cpu"
  std::string dtype;
  std::string unavailable;  // why nothing burned
  std::string why_cpu;      // why the burn ran on the CPU
  double seconds = 0;
  std::vector<BurnDevice> devices;
  PeerJudgement peers;  // over the figures, after confirmation
};

struct BurnOptions {
  double seconds = 60;
  PeerRules rules;
  // Called from the burning threads with each measurement; must be thread-safe.
  std::function<void(const BurnDevice&, double rate)> on_measurement;
};

BurnRecord run_burn(const std::string& host, const BurnOptions& options);

// The median of the second half of `rates` (all of them when fewer than 2).
double steady_rate(const std::vector<double>& rates);

// The burn's settings from health.burn_s and the host file's [health] floor (`rules` may be null:
// none), as node-check and accept --level=full run it.
BurnOptions burn_options_of(double burn_s, const InventorySpec* rules);

// A burn's findings: a burn that could not run where a driver is (`driver_present`), a device
// that failed, and each GPU below its peers.
std::vector<HealthFinding> burn_findings(const std::string& host, const BurnRecord& burn,
                                         bool driver_present);

// "GPU 3 (GPU-..., 0000:9a:00.0)", or "the CPU".
std::string burn_device_label(const BurnDevice& d);

}  // namespace tp
