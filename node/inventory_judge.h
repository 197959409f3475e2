#pragma once
// Judges a machine against its host type's inventory (docs/node-check.md, "Inventory"): each key
// of [inventory] that was given is one item, PASS or FAIL, with what was expected and found; a
// FAIL names the GPU (index, UUID, PCI address) or port it is about, and what to do.
#include <optional>
#include <string>
#include <vector>

#include "node/inventory_spec.h"
#include "node/machine_facts.h"

namespace tp {

// One GPU as its driver lists it (NVML, gpu/nvml.h); the fields a host file can expect.
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
};

// What the GPU driver says, or why it could not be asked.
struct DriverView {
  bool loaded = false;
  std::string unavailable;  // "libnvidia-ml.so.1: cannot open shared object file"
  std::string driver_version, cuda_driver_version, nccl_version;
  std::vector<DriverGpu> gpus;
};

struct InventoryItem {
  std::string key;       // the [inventory] key
  std::string expected;  // as the host file states it
  std::string found;     // what the machine has, in the same terms
  std::string status;    // "pass", "fail", or "n/a" (found says why)
  std::string reason;    // a FAIL's sentence, naming the host and the part
  std::string action;    // what an operator does about a FAIL
};

std::vector<InventoryItem> judge_inventory(const InventorySpec& spec, const MachineFacts& machine,
                                           const std::vector<MountFacts>& mounts,
                                           const DriverView& driver);

}  // namespace tp
