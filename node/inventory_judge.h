#pragma once
// Judges a machine against its host type's inventory (docs/node-check.md, "Inventory"): each key
// of [inventory] that was given is one item, PASS or FAIL, with what was expected and found; a
// FAIL names the GPU (index, UUID, PCI address) or port it is about, and what to do.
#include <optional>
#include <string>
#include <vector>

#include "gpu/driver_view.h"
#include "node/inventory_spec.h"
#include "node/machine_facts.h"

namespace tp {

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
