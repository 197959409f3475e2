#include "gpu/nvml_library.h"

#include <dlfcn.h>

namespace tp {
namespace {

template <typename F>
void bind(void* handle, F& function, const char* symbol) {
  function = reinterpret_cast<F>(dlsym(handle, symbol));
}

}  // namespace

Nvml open_nvml(std::string& why) {
  Nvml n;
  n.handle = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!n.handle) {
    const char* error = dlerror();
    why = error ? error : "libnvidia-ml.so.1: dlopen failed";
    return n;
  }
  bind(n.handle, n.init, "nvmlInit_v2");
  bind(n.handle, n.shutdown, "nvmlShutdown");
  bind(n.handle, n.error_string, "nvmlErrorString");
  bind(n.handle, n.driver_version, "nvmlSystemGetDriverVersion");
  bind(n.handle, n.cuda_driver_version, "nvmlSystemGetCudaDriverVersion_v2");
  bind(n.handle, n.count, "nvmlDeviceGetCount_v2");
  bind(n.handle, n.by_index, "nvmlDeviceGetHandleByIndex_v2");
  bind(n.handle, n.name, "nvmlDeviceGetName");
  bind(n.handle, n.uuid, "nvmlDeviceGetUUID");
  bind(n.handle, n.pci_info, "nvmlDeviceGetPciInfo_v3");
  bind(n.handle, n.memory, "nvmlDeviceGetMemoryInfo");
  bind(n.handle, n.vbios, "nvmlDeviceGetVbiosVersion");
  bind(n.handle, n.ecc_mode, "nvmlDeviceGetEccMode");
  bind(n.handle, n.mig_mode, "nvmlDeviceGetMigMode");
  bind(n.handle, n.persistence, "nvmlDeviceGetPersistenceMode");
  bind(n.handle, n.max_pcie_gen, "nvmlDeviceGetMaxPcieLinkGeneration");
  bind(n.handle, n.max_pcie_width, "nvmlDeviceGetMaxPcieLinkWidth");
  bind(n.handle, n.nvlink_state, "nvmlDeviceGetNvLinkState");
  bind(n.handle, n.p2p_status, "nvmlDeviceGetP2PStatus");
  bind(n.handle, n.total_ecc, "nvmlDeviceGetTotalEccErrors");
  bind(n.handle, n.retired_pages, "nvmlDeviceGetRetiredPages");
  bind(n.handle, n.retired_pending, "nvmlDeviceGetRetiredPagesPendingStatus");
  bind(n.handle, n.remapped_rows, "nvmlDeviceGetRemappedRows");
  bind(n.handle, n.clock_events, "nvmlDeviceGetCurrentClocksEventReasons");
  if (!n.clock_events) bind(n.handle, n.clock_events, "nvmlDeviceGetCurrentClocksThrottleReasons");
  bind(n.handle, n.temperature, "nvmlDeviceGetTemperature");
  bind(n.handle, n.power_usage, "nvmlDeviceGetPowerUsage");
  bind(n.handle, n.power_limit, "nvmlDeviceGetEnforcedPowerLimit");
  bind(n.handle, n.clock, "nvmlDeviceGetClockInfo");
  bind(n.handle, n.max_clock, "nvmlDeviceGetMaxClockInfo");
  bind(n.handle, n.pcie_gen, "nvmlDeviceGetCurrPcieLinkGeneration");
  bind(n.handle, n.pcie_width, "nvmlDeviceGetCurrPcieLinkWidth");
  bind(n.handle, n.pcie_replays, "nvmlDeviceGetPcieReplayCounter");
  bind(n.handle, n.utilization, "nvmlDeviceGetUtilizationRates");
  bind(n.handle, n.nvlink_errors, "nvmlDeviceGetNvLinkErrorCounter");
  bind(n.handle, n.event_set_create, "nvmlEventSetCreate");
  bind(n.handle, n.supported_events, "nvmlDeviceGetSupportedEventTypes");
  bind(n.handle, n.register_events, "nvmlDeviceRegisterEvents");
  bind(n.handle, n.event_wait, "nvmlEventSetWait_v2");
  bind(n.handle, n.event_set_free, "nvmlEventSetFree");
  if (!n.init || !n.shutdown || !n.count || !n.by_index)
    why =
        "libnvidia-ml.so.1 lacks nvmlInit_v2, nvmlDeviceGetCount_v2 or "
        "nvmlDeviceGetHandleByIndex_v2";
  return n;
}

}  // namespace tp
