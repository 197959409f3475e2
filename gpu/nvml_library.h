#pragma once
// The NVML ABI trainproof relies on (nvml.h of the R550 driver and later; these entry points and
// layouts have not changed since their _v2/_v3 versions), declared here because the build hosts
// have no nvml.h. Internal to gpu/: gpu/nvml.h is the interface.
#include <string>

#include "gpu/driver_view.h"

namespace tp {

using NvmlReturn = int;
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr unsigned kNvlinkMaxLinks = 18;

struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device;
  unsigned pci_device_id;  // device id << 16 | vendor id
  unsigned pci_subsystem_id;
  char bus_id[32];
};

struct NvmlMemory {
  unsigned long long total, free, used;
};

// nvmlUtilization_t.
struct NvmlUtilization {
  unsigned gpu, memory;
};

// nvmlEventSet_t and nvmlEventData_t.
using NvmlEventSet = struct NvmlEventSetOpaque*;
struct NvmlEventData {
  NvmlDevice device;
  unsigned long long event_type;
  unsigned long long event_data;  // the XID, for an XID event (999: the driver does not know it)
  unsigned gpu_instance_id, compute_instance_id;
};
constexpr unsigned long long kNvmlEventXidCriticalError = 0x8;
// nvmlGpuP2PCapsIndex_t's NVML_P2P_CAPS_INDEX_NVLINK, and nvmlGpuP2PStatus_t's OK.
constexpr int kNvmlP2pCapsNvlink = 2;
constexpr int kNvmlP2pStatusOk = 0;
constexpr NvmlReturn kNvmlTimeout = 10;

// The functions gpu/nvml.cpp and gpu/nvml_health.cpp call, looked up by name; a missing one
// leaves its field unknown.
struct Nvml {
  void* handle = nullptr;
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*driver_version)(char*, unsigned) = nullptr;
  NvmlReturn (*cuda_driver_version)(int*) = nullptr;
  NvmlReturn (*count)(unsigned*) = nullptr;
  NvmlReturn (*by_index)(unsigned, NvmlDevice*) = nullptr;
  NvmlReturn (*name)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*uuid)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*pci_info)(NvmlDevice, NvmlPciInfo*) = nullptr;
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*vbios)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*ecc_mode)(NvmlDevice, int*, int*) = nullptr;
  NvmlReturn (*mig_mode)(NvmlDevice, unsigned*, unsigned*) = nullptr;
  NvmlReturn (*persistence)(NvmlDevice, int*) = nullptr;
  NvmlReturn (*max_pcie_gen)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*max_pcie_width)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*nvlink_state)(NvmlDevice, unsigned, int*) = nullptr;
  NvmlReturn (*p2p_status)(NvmlDevice, NvmlDevice, int, int*) = nullptr;
  // Health (gpu/nvml_health.cpp).
  NvmlReturn (*total_ecc)(NvmlDevice, int, int, unsigned long long*) = nullptr;
  NvmlReturn (*retired_pages)(NvmlDevice, int, unsigned*, unsigned long long*) = nullptr;
  NvmlReturn (*retired_pending)(NvmlDevice, int*) = nullptr;
  NvmlReturn (*remapped_rows)(NvmlDevice, unsigned*, unsigned*, unsigned*, unsigned*) = nullptr;
  NvmlReturn (*clock_events)(NvmlDevice, unsigned long long*) = nullptr;
  NvmlReturn (*temperature)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*power_usage)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*power_limit)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*clock)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*max_clock)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*pcie_gen)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*pcie_width)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*pcie_replays)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  NvmlReturn (*nvlink_errors)(NvmlDevice, unsigned, int, unsigned long long*) = nullptr;
  // XID events (gpu/nvml_watch.cpp).
  NvmlReturn (*event_set_create)(NvmlEventSet*) = nullptr;
  NvmlReturn (*supported_events)(NvmlDevice, unsigned long long*) = nullptr;
  NvmlReturn (*register_events)(NvmlDevice, unsigned long long, NvmlEventSet) = nullptr;
  NvmlReturn (*event_wait)(NvmlEventSet, NvmlEventData*, unsigned) = nullptr;
  NvmlReturn (*event_set_free)(NvmlEventSet) = nullptr;
};

// Opens libnvidia-ml.so.1 and looks up every function; `why` says what is missing, "" when the
// library can be used.
Nvml open_nvml(std::string& why);

// NVML's text for `code`.
std::string nvml_error_text(const Nvml& nvml, NvmlReturn code);

// What the driver says of GPU `index` (its identity, set-up, links and health), in an open session.
DriverGpu read_driver_gpu(const Nvml& nvml, unsigned index, NvmlDevice device);

// The GPU's health counters and state (docs/node-check.md, "GPU health").
GpuHealth read_gpu_health(const Nvml& nvml, NvmlDevice device);

}  // namespace tp
