// A fake libnvidia-ml.so.1 for the tests (docs/node-check.md, "Testing without a GPU"): the NVML
// functions gpu/nvml.cpp calls, answering from the JSON file $FAKE_NVML_FILE. The test puts its
// folder on LD_LIBRARY_PATH; trainproof opens it as it opens the real one, with no switch of its
// own. The file:
//   {"driver_version": "550.90.07", "cuda_driver_version": 12040, "init_error": 9,
//    "gpus": [{"name": "NVIDIA H200", "uuid": "GPU-...", "pci_bus_id": "00000000:18:00.0",
//              "device_id": 9013, "memory_mib": 143771, "vbios": "96.00.99.00.01",
//              "ecc": [1, 1], "mig": [0, 0], "persistence": 1, "nvlinks_up": 18,
//              "max_pcie": [5, 16],
//              "health": {"ecc": {"uncorrected_volatile": 1}, "retired": [0, 0],
//                         "retired_pending": 0, "remapped_rows": [0, 0, 1, 0],
//                         "clock_event_reasons": 8, "temperature_c": 35, "power_mw": 90000,
//                         "power_limit_mw": 700000, "sm_clock_mhz": 345,
//                         "max_sm_clock_mhz": 1980, "pcie": [1, 16], "pcie_replays": 0,
//                         "utilization_pct": 0,
//                         "nvlink_errors": [0, 0, 0, 0]}}]}
// Every field is optional; a field not given answers NVML_ERROR_NOT_SUPPORTED.
// Two more, for what changes during a run:
//   "ranks": [2]      only the processes of these ranks (OMPI_COMM_WORLD_RANK, PMIX_RANK or
//                     SLURM_PROCID) see the file's GPUs; the others' nvmlInit_v2 answers
//                     Driver Not Loaded, as on a node without the driver;
//   a GPU's "later": {"health": {...}, "nvlinks_up": 17, "missing": true}: from the process's
//                     second nvmlInit_v2 on, these fields replace the GPU's own ("health" field
//                     by field); "missing" makes it a GPU the driver still counts but cannot
//                     open (NVML_ERROR_GPU_IS_LOST), as one that fell off the bus;
//   "later_from_read": 4  the "later" fields from that nvmlInit_v2 on instead (accept's reads:
//                     the preflight's, the watch's, then one at each stage's end).
// A GPU's "nvlink_peers": [1, 2, ...]: the GPUs (by index) it reaches over NVLink peer-to-peer.
// A GPU's "hang_s": 300 (put it in "later"): reading its clock-event reasons takes that long, as a
// driver that stopped answering, so the watch of a load is stuck inside it.
// And for XID events: a GPU's "xid_events": [79] are delivered once each, through the event set,
// to the session that registers the GPU for them (put them in "later" to raise them during a
// load); "events_error": 3 makes nvmlDeviceRegisterEvents answer that code.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

namespace {

using nlohmann::json;
constexpr int kSuccess = 0, kInvalidArgument = 2, kNotSupported = 3, kUninitialized = 1;

const json& fake() {
  static const json data = [] {
    const char* path = std::getenv("FAKE_NVML_FILE");
    if (!path) return json::object();
    std::ifstream in(path);
    return in ? json::parse(in, nullptr, false) : json::object();
  }();
  return data;
}

bool initialised = false;
int reads = 0;                      // nvmlInit_v2 calls that succeeded
json current_gpus = json::array();  // the GPUs as this read sees them

// The GPUs of the file, as the `reads`-th read sees them.
json gpus_at_read(int read) {
  json seen = json::array();
  const auto found = fake().find("gpus");
  if (found == fake().end() || !found->is_array()) return seen;
  const int later_from = fake().value("later_from_read", 2);
  for (const json& g : *found) {
    if (read < later_from || !g.contains("later")) {
      seen.push_back(g);
      continue;
    }
    const json& later = g["later"];
    json now = g;
    for (const auto& [key, value] : later.items())
      if (key == "health")
        for (const auto& [field, v] : value.items()) now["health"][field] = v;
      else
        now[key] = value;
    seen.push_back(now);
  }
  return seen;
}

const json& gpus() {
  return current_gpus;
}

bool this_rank_sees_the_gpus() {
  const auto ranks = fake().find("ranks");
  if (ranks == fake().end()) return true;
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"})
    if (const char* value = std::getenv(name))
      for (const json& r : *ranks)
        if (r.get<int>() == std::atoi(value)) return true;
  return false;
}

const json* gpu(void* device) {
  const size_t index = reinterpret_cast<size_t>(device) - 1;
  return initialised && index < gpus().size() ? &gpus()[index] : nullptr;
}

int text(const json* g, const char* field, char* out, unsigned length) {
  if (!g || !g->contains(field)) return g ? kNotSupported : kInvalidArgument;
  const std::string value = (*g)[field].get<std::string>();
  if (value.size() + 1 > length) return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  std::memcpy(out, value.c_str(), value.size() + 1);
  return kSuccess;
}

template <typename T>
int pair(const json* g, const char* field, T* now, T* pending) {
  if (!g || !g->contains(field)) return g ? kNotSupported : kInvalidArgument;
  *now = T((*g)[field][0].get<int>());
  *pending = T((*g)[field][1].get<int>());
  return kSuccess;
}

struct PciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};

struct Memory {
  unsigned long long total, free, used;
};

// A field of the GPU's "health" object.
const json* health(void* device, const char* field) {
  const json* g = gpu(device);
  if (!g || !g->contains("health") || !(*g)["health"].contains(field)) return nullptr;
  return &(*g)["health"][field];
}

template <typename T>
int health_value(void* device, const char* field, T* out, int index = -1) {
  const json* value = health(device, field);
  if (!value) return gpu(device) ? kNotSupported : kInvalidArgument;
  *out = T(index < 0 ? value->get<long long>() : (*value)[size_t(index)].get<long long>());
  return kSuccess;
}

struct EventData {
  void* device;
  unsigned long long event_type, event_data;
  unsigned gpu_instance_id, compute_instance_id;
};

std::deque<EventData> pending_events;  // registered GPUs' XIDs not yet delivered

}  // namespace

extern "C" {

int nvmlInit_v2() {
  if (const int code = fake().value("init_error", 0); code != 0) return code;
  if (!this_rank_sees_the_gpus()) return 9;  // NVML_ERROR_DRIVER_NOT_LOADED
  initialised = true;
  current_gpus = gpus_at_read(++reads);
  return kSuccess;
}
int nvmlShutdown() {
  initialised = false;
  return kSuccess;
}
const char* nvmlErrorString(int code) {
  return code == 9               ? "Driver Not Loaded"
         : code == kNotSupported ? "Not Supported"
                                 : "Unknown Error";
}
int nvmlSystemGetDriverVersion(char* out, unsigned length) {
  const json& f = fake();
  return f.contains("driver_version") ? text(&f, "driver_version", out, length) : kNotSupported;
}
int nvmlSystemGetCudaDriverVersion_v2(int* version) {
  if (!fake().contains("cuda_driver_version")) return kNotSupported;
  *version = fake()["cuda_driver_version"].get<int>();
  return kSuccess;
}
int nvmlDeviceGetCount_v2(unsigned* count) {
  if (!initialised) return kUninitialized;
  *count = unsigned(gpus().size());
  return kSuccess;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if (!initialised || index >= gpus().size()) return kInvalidArgument;
  if (gpus()[index].value("missing", false)) return 15;  // NVML_ERROR_GPU_IS_LOST
  *device = reinterpret_cast<void*>(size_t(index) + 1);
  return kSuccess;
}
int nvmlDeviceGetName(void* d, char* out, unsigned length) {
  return text(gpu(d), "name", out, length);
}
int nvmlDeviceGetUUID(void* d, char* out, unsigned length) {
  return text(gpu(d), "uuid", out, length);
}
int nvmlDeviceGetVbiosVersion(void* d, char* out, unsigned length) {
  return text(gpu(d), "vbios", out, length);
}
int nvmlDeviceGetPciInfo_v3(void* d, PciInfo* pci) {
  const json* g = gpu(d);
  if (!g) return kInvalidArgument;
  std::memset(pci, 0, sizeof *pci);
  const std::string bus_id = g->value("pci_bus_id", "");
  std::strncpy(pci->bus_id, bus_id.c_str(), sizeof pci->bus_id - 1);
  pci->pci_device_id = unsigned(g->value("device_id", 0)) << 16 | 0x10de;
  return kSuccess;
}
int nvmlDeviceGetMemoryInfo(void* d, Memory* memory) {
  const json* g = gpu(d);
  if (!g || !g->contains("memory_mib")) return g ? kNotSupported : kInvalidArgument;
  memory->total = (*g)["memory_mib"].get<unsigned long long>() << 20;
  memory->free = memory->total;
  memory->used = 0;
  return kSuccess;
}
int nvmlDeviceGetEccMode(void* d, int* now, int* pending) {
  return pair(gpu(d), "ecc", now, pending);
}
int nvmlDeviceGetMigMode(void* d, unsigned* now, unsigned* pending) {
  return pair(gpu(d), "mig", now, pending);
}
int nvmlDeviceGetPersistenceMode(void* d, int* mode) {
  const json* g = gpu(d);
  if (!g || !g->contains("persistence")) return g ? kNotSupported : kInvalidArgument;
  *mode = (*g)["persistence"].get<int>();
  return kSuccess;
}
int nvmlDeviceGetMaxPcieLinkGeneration(void* d, unsigned* value) {
  const json* g = gpu(d);
  if (!g || !g->contains("max_pcie")) return g ? kNotSupported : kInvalidArgument;
  *value = (*g)["max_pcie"][0].get<unsigned>();
  return kSuccess;
}
int nvmlDeviceGetMaxPcieLinkWidth(void* d, unsigned* value) {
  const json* g = gpu(d);
  if (!g || !g->contains("max_pcie")) return g ? kNotSupported : kInvalidArgument;
  *value = (*g)["max_pcie"][1].get<unsigned>();
  return kSuccess;
}
int nvmlDeviceGetNvLinkState(void* d, unsigned link, int* active) {
  const json* g = gpu(d);
  if (!g || !g->contains("nvlinks_up")) return g ? kNotSupported : kInvalidArgument;
  if (link >= 18) return kInvalidArgument;
  *active = int(link) < (*g)["nvlinks_up"].get<int>() ? 1 : 0;
  return kSuccess;
}

// NVLink peer-to-peer between two GPUs: both state "nvlink_peers" and each is in the other's list
// (NVML_P2P_STATUS_OK), else NOT_SUPPORTED (5); without the field on both, the call itself is not
// supported, as on a driver that cannot say.
int nvmlDeviceGetP2PStatus(void* a, void* b, int caps, int* status) {
  const json *ga = gpu(a), *gb = gpu(b);
  if (!ga || !gb || caps != 2) return kInvalidArgument;
  if (!ga->contains("nvlink_peers") || !gb->contains("nvlink_peers")) return kNotSupported;
  const auto lists = [](const json* g, void* other) {
    const int index = int(reinterpret_cast<size_t>(other) - 1);
    for (const json& peer : (*g)["nvlink_peers"])
      if (peer.get<int>() == index) return true;
    return false;
  };
  *status = lists(ga, b) && lists(gb, a) ? 0 : 5;
  return kSuccess;
}

int nvmlDeviceGetTotalEccErrors(void* d, int type, int counter, unsigned long long* count) {
  const json* ecc = health(d, "ecc");
  if (!ecc) return gpu(d) ? kNotSupported : kInvalidArgument;
  const char* names[2][2] = {{"corrected_volatile", "corrected_aggregate"},
                             {"uncorrected_volatile", "uncorrected_aggregate"}};
  *count = ecc->value(names[type & 1][counter & 1], 0ULL);
  return kSuccess;
}
int nvmlDeviceGetRetiredPages(void* d, int cause, unsigned* count, unsigned long long*) {
  unsigned pages = 0;
  if (const int code = health_value(d, "retired", &pages, cause & 1); code != kSuccess) return code;
  const bool fits = *count >= pages;
  *count = pages;
  return fits ? kSuccess : 7;  // NVML_ERROR_INSUFFICIENT_SIZE, as NVML answers an empty buffer
}
int nvmlDeviceGetRetiredPagesPendingStatus(void* d, int* pending) {
  return health_value(d, "retired_pending", pending);
}
int nvmlDeviceGetRemappedRows(void* d, unsigned* corrected, unsigned* uncorrected,
                              unsigned* pending, unsigned* failed) {
  if (const int code = health_value(d, "remapped_rows", corrected, 0); code != kSuccess)
    return code;
  health_value(d, "remapped_rows", uncorrected, 1);
  health_value(d, "remapped_rows", pending, 2);
  health_value(d, "remapped_rows", failed, 3);
  return kSuccess;
}
int nvmlDeviceGetCurrentClocksEventReasons(void* d, unsigned long long* reasons) {
  if (const json* g = gpu(d); g && g->contains("hang_s"))
    std::this_thread::sleep_for(std::chrono::duration<double>((*g)["hang_s"].get<double>()));
  return health_value(d, "clock_event_reasons", reasons);
}
int nvmlDeviceGetTemperature(void* d, int, unsigned* celsius) {
  return health_value(d, "temperature_c", celsius);
}
int nvmlDeviceGetPowerUsage(void* d, unsigned* mw) {
  return health_value(d, "power_mw", mw);
}
int nvmlDeviceGetEnforcedPowerLimit(void* d, unsigned* mw) {
  return health_value(d, "power_limit_mw", mw);
}
int nvmlDeviceGetClockInfo(void* d, int, unsigned* mhz) {
  return health_value(d, "sm_clock_mhz", mhz);
}
int nvmlDeviceGetMaxClockInfo(void* d, int, unsigned* mhz) {
  return health_value(d, "max_sm_clock_mhz", mhz);
}
int nvmlDeviceGetCurrPcieLinkGeneration(void* d, unsigned* gen) {
  return health_value(d, "pcie", gen, 0);
}
int nvmlDeviceGetCurrPcieLinkWidth(void* d, unsigned* width) {
  return health_value(d, "pcie", width, 1);
}
int nvmlDeviceGetUtilizationRates(void* d, unsigned* rates) {
  rates[1] = 0;  // nvmlUtilization_t {gpu, memory}
  return health_value(d, "utilization_pct", rates);
}
int nvmlDeviceGetPcieReplayCounter(void* d, unsigned* count) {
  return health_value(d, "pcie_replays", count);
}
int nvmlDeviceGetNvLinkErrorCounter(void* d, unsigned link, int counter,
                                    unsigned long long* value) {
  if (link >= 18) return kInvalidArgument;
  return health_value(d, "nvlink_errors", value, counter & 3);
}

int nvmlEventSetCreate(void** set) {
  if (!initialised) return kUninitialized;
  pending_events.clear();
  *set = reinterpret_cast<void*>(size_t(1));
  return kSuccess;
}
int nvmlDeviceGetSupportedEventTypes(void* d, unsigned long long* types) {
  if (!gpu(d)) return kInvalidArgument;
  *types = 0x8;  // nvmlEventTypeXidCriticalError
  return kSuccess;
}
int nvmlDeviceRegisterEvents(void* d, unsigned long long types, void*) {
  const json* g = gpu(d);
  if (!g) return kInvalidArgument;
  if (const int code = fake().value("events_error", 0); code != 0) return code;
  if ((types & 0x8) && g->contains("xid_events"))
    for (const json& xid : (*g)["xid_events"])
      pending_events.push_back({d, 0x8, xid.get<unsigned long long>(), 0, 0});
  return kSuccess;
}
int nvmlEventSetWait_v2(void*, EventData* data, unsigned timeout_ms) {
  if (!pending_events.empty()) {
    *data = pending_events.front();
    pending_events.pop_front();
    return kSuccess;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
  return 10;  // NVML_ERROR_TIMEOUT
}
int nvmlEventSetFree(void*) {
  pending_events.clear();
  return kSuccess;
}

}  // extern "C"
