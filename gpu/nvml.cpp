#include "gpu/nvml.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gpu/nvml_library.h"

namespace tp {
namespace {

// A text attribute, "" when the call is missing or fails.
std::string text_of(NvmlReturn (*call)(NvmlDevice, char*, unsigned), NvmlDevice d) {
  char text[96] = {};
  return call && call(d, text, sizeof text) == kNvmlSuccess ? std::string(text) : "";
}

// An on/off pair (now, after the next reset): 1, 0, or -1 when not reported.
template <typename T>
void mode_of(NvmlReturn (*call)(NvmlDevice, T*, T*), NvmlDevice d, int& now, int& pending) {
  T current{}, next{};
  if (!call || call(d, &current, &next) != kNvmlSuccess) return;
  now = current ? 1 : 0;
  pending = next ? 1 : 0;
}

}  // namespace

DriverGpu read_driver_gpu(const Nvml& n, unsigned index, NvmlDevice d) {
  DriverGpu g;
  g.index = int(index);
  g.name = text_of(n.name, d);
  g.uuid = text_of(n.uuid, d);
  g.vbios = text_of(n.vbios, d);
  NvmlPciInfo pci{};
  if (n.pci_info && n.pci_info(d, &pci) == kNvmlSuccess) {
    g.pci_address = sysfs_pci_address(pci.bus_id);
    g.device_id = pci.pci_device_id >> 16;
  }
  NvmlMemory memory{};
  if (n.memory && n.memory(d, &memory) == kNvmlSuccess) g.memory_gb = double(memory.total) / 1e9;
  g.health = read_gpu_health(n, d);
  mode_of(n.ecc_mode, d, g.ecc, g.ecc_pending);
  mode_of(n.mig_mode, d, g.mig, g.mig_pending);
  int persistence = 0;
  if (n.persistence && n.persistence(d, &persistence) == kNvmlSuccess)
    g.persistence = persistence ? 1 : 0;
  unsigned value = 0;
  if (n.max_pcie_gen && n.max_pcie_gen(d, &value) == kNvmlSuccess) g.max_pcie_gen = int(value);
  if (n.max_pcie_width && n.max_pcie_width(d, &value) == kNvmlSuccess)
    g.max_pcie_width = int(value);
  if (n.nvlink_state) {
    g.nvlinks_up = 0;
    for (unsigned link = 0; link < kNvlinkMaxLinks; ++link) {
      int active = 0;
      // A link past the GPU's last one answers NOT_SUPPORTED or INVALID_ARGUMENT: not up.
      if (n.nvlink_state(d, link, &active) == kNvmlSuccess && active) ++g.nvlinks_up;
    }
  }
  return g;
}

namespace {

std::string cuda_version_text(int code) {
  return std::to_string(code / 1000) + "." + std::to_string(code % 1000 / 10);
}

}  // namespace

std::string nvml_error_text(const Nvml& n, NvmlReturn code) {
  const char* text = n.error_string ? n.error_string(code) : nullptr;
  return text ? text : "NVML error " + std::to_string(code);
}

std::string sysfs_pci_address(const std::string& nvml_bus_id) {
  std::string text;
  for (char c : nvml_bus_id) text += char(std::tolower(static_cast<unsigned char>(c)));
  const size_t colon = text.find(':');
  if (colon == std::string::npos || colon == 0) return text;
  // NVML pads the domain to 8 hex digits; sysfs prints it with 4 at least (10000 for a VMD one).
  const std::string domain_text = text.substr(0, colon);  // `end` points into it
  char* end = nullptr;
  const unsigned long domain = std::strtoul(domain_text.c_str(), &end, 16);
  if (*end != '\0') return text;
  char padded[16];
  std::snprintf(padded, sizeof padded, "%04lx", domain);
  return padded + text.substr(colon);
}

namespace {

// The pairs of `devices` NVML reports NVLink peer-to-peer between; -1 when it cannot say for one.
int nvlink_pairs(const Nvml& n, const std::vector<NvmlDevice>& devices) {
  if (!n.p2p_status) return -1;
  int pairs = 0;
  for (size_t a = 0; a < devices.size(); ++a)
    for (size_t b = a + 1; b < devices.size(); ++b) {
      int status = -1;
      if (n.p2p_status(devices[a], devices[b], kNvmlP2pCapsNvlink, &status) != kNvmlSuccess)
        return -1;
      pairs += status == kNvmlP2pStatusOk;
    }
  return pairs;
}

}  // namespace

DriverView read_nvml() {
  DriverView view;
  Nvml n = open_nvml(view.unavailable);
  if (!view.unavailable.empty()) return view;
  if (const NvmlReturn code = n.init(); code != kNvmlSuccess) {
    view.unavailable = "nvmlInit_v2: " + nvml_error_text(n, code);
    return view;
  }
  char version[96] = {};
  if (n.driver_version && n.driver_version(version, sizeof version) == kNvmlSuccess)
    view.driver_version = version;
  int cuda = 0;
  if (n.cuda_driver_version && n.cuda_driver_version(&cuda) == kNvmlSuccess && cuda > 0)
    view.cuda_driver_version = cuda_version_text(cuda);
  unsigned count = 0;
  if (const NvmlReturn code = n.count(&count); code != kNvmlSuccess) {
    view.unavailable = "nvmlDeviceGetCount_v2: " + nvml_error_text(n, code);
    n.shutdown();
    return view;
  }
  view.loaded = true;
  std::vector<NvmlDevice> opened;
  for (unsigned i = 0; i < count; ++i) {
    NvmlDevice d = nullptr;
    // A GPU NVML counts but cannot open (lost, or in a reset) is left out: the PCI bus still
    // shows it, and the inventory names it missing.
    if (n.by_index(i, &d) == kNvmlSuccess) {
      view.gpus.push_back(read_driver_gpu(n, i, d));
      opened.push_back(d);
    }
  }
  view.nvlink_pairs = nvlink_pairs(n, opened);
  n.shutdown();
  return view;  // the library stays loaded: unloading a driver library is never worth the risk
}

}  // namespace tp
