#pragma once
// Watches a node's GPUs through a load (docs/node-check.md, "Health during a load"): one thread
// with its own NVML session samples every GPU's health each interval (clock-event reasons, PCIe
// link, clocks, temperature, power) and waits on an NVML event set for XIDs in between, so an XID
// raised during the load is seen even where the kernel log cannot be read. NVML reports only the
// XIDs raised after registration: the look-back is the kernel log's (node/kernel_log.h).
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gpu/driver_view.h"

namespace tp {

struct GpuXid {
  int gpu_index = -1;
  std::string uuid, pci_address;
  long long xid = 0;
  double at_s = 0;  // seconds after the watch started
};

struct NvmlWatchRecord {
  std::string unavailable;                      // why nothing was watched; "" when it was
  std::string events_unavailable;               // why XIDs were not watched; "" when they were
  std::vector<DriverGpu> gpus;                  // as the watch's first read found them
  std::vector<std::vector<GpuHealth>> samples;  // [gpu][sample], one each interval
  std::vector<GpuXid> xids;
  double seconds = 0;
  bool stopped = true;  // false: the watch did not return within stop()'s deadline
};

class NvmlWatch {
 public:
  // Starts the watch; it samples at once, then every `interval_s`.
  explicit NvmlWatch(double interval_s);
  ~NvmlWatch();
  NvmlWatch(const NvmlWatch&) = delete;
  NvmlWatch& operator=(const NvmlWatch&) = delete;

  // Stops the watch and returns what it saw. A watch stuck in the driver past `deadline_s` is
  // left behind (it owns what it touches) and its record says so: a driver that does not answer
  // is the node's finding, not a hang of trainproof.
  NvmlWatchRecord stop(double deadline_s);

  struct State;

 private:
  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace tp
