#pragma once
// What the NVIDIA driver says about a node's GPUs (gpu/nvml.h reads it), in the terms a host file's
// [inventory] expects them (node/inventory_judge.h judges them; docs/node-check.md).
#include <string>
#include <vector>

namespace tp {

// A GPU's health as the driver reports it at one moment (docs/node-check.md, "GPU health"): its
// error counters, its memory repairs, why its clocks are held down, and its figures at rest. -1
// where the GPU does not report a field.
struct GpuHealth {
  long long ecc_corrected_volatile = -1, ecc_uncorrected_volatile = -1;
  long long ecc_corrected_aggregate = -1, ecc_uncorrected_aggregate = -1;
  long long retired_sbe = -1, retired_dbe = -1;  // pages retired for single- or double-bit errors
  int retired_pending = -1;                      // a retirement waits for the next reset
  long long remapped_correctable = -1, remapped_uncorrectable = -1;
  int remap_pending = -1, remap_failed = -1;
  long long clock_event_reasons = -1;  // NVML's clocks-event (throttle) reason bits
  int temperature_c = -1;
  double power_w = -1, power_limit_w = -1;
  int sm_clock_mhz = -1, max_sm_clock_mhz = -1;
  int pcie_gen = -1, pcie_width = -1;  // now; a GPU at rest lowers its generation
  int utilization_pct = -1;            // share of the driver's last sample period a kernel ran
  long long pcie_replays = -1;
  // Summed over the GPU's NVLink links.
  long long nvlink_replay = -1, nvlink_recovery = -1, nvlink_crc = -1;
};

struct DriverGpu {
  int index = 0;
  std::string name, uuid, pci_address;  // pci_address as sysfs spells it: 0000:9a:00.0
  unsigned device_id = 0;
  double memory_gb = -1;
  std::string vbios;
  int ecc = -1, ecc_pending = -1;  // 1 on, 0 off, -1 not reported
  int mig = -1, mig_pending = -1;
  int persistence = -1;
  int nvlinks_up = -1;
  int max_pcie_gen = -1, max_pcie_width = -1;
  GpuHealth health;
};

// "GPU 3 (GPU-5b1e..., 0000:9a:00.0)": what an operator finds the GPU by in nvidia-smi and lspci.
inline std::string gpu_label(const DriverGpu& g) {
  return "GPU " + std::to_string(g.index) + " (" + (g.uuid.empty() ? "" : g.uuid + ", ") +
         g.pci_address + ")";
}

// What the GPU driver says, or why it could not be asked.
struct DriverView {
  bool loaded = false;
  std::string unavailable;  // "libnvidia-ml.so.1: cannot open shared object file"
  std::string driver_version, cuda_driver_version;
  std::string nccl_version, nccl_unavailable;  // libnccl.so.2's, or why there is none
  std::vector<DriverGpu> gpus;
  // The pairs of GPUs NVML reports NVLink peer-to-peer between (nvmlDeviceGetP2PStatus), of
  // gpus.size() x (gpus.size() - 1) / 2; -1 where the driver could not say for every pair.
  int nvlink_pairs = -1;
  // Every pair of two or more GPUs over NVLink: an NVSwitch baseboard (or a full mesh), where
  // every pair runs over one kind of path.
  bool every_pair_nvlink() const {
    const size_t n = gpus.size();
    return n >= 2 && nvlink_pairs >= 0 && size_t(nvlink_pairs) == n * (n - 1) / 2;
  }
};

}  // namespace tp
