#pragma once
// What changed on a node while a load ran (docs/node-check.md, "Change over a load"): each GPU's
// error counters and memory repairs between a read before the load and one after, and each RDMA
// port's error counters. A counter that rose is the load's finding even where its lifetime
// value is below any limit: a GPU that logs an uncorrectable error under training, or a cable
// whose symbol errors climb while the fabric is busy, fails the next job too.
#include <string>
#include <vector>

#include "gpu/driver_view.h"
#include "node/gpu_health.h"
#include "node/machine_facts.h"

namespace tp {

// GPUs are matched by UUID (by PCI address where the driver gives none); a GPU read before and
// missing after left the driver during the load. `during` ends each reason: when it happened
// ("during the load", "during stage train").
std::vector<HealthFinding> judge_gpu_change(const std::string& host, const DriverView& before,
                                            const DriverView& after,
                                            const std::string& during = "during the load");

// Ports are matched by device and port; a port missing after the load is not judged here (the
// inventory names a missing port). `rail_nics[k]` is the NIC local rank k's traffic leaves by
// (fabric/rank_nic.h): a port's findings name the rails that use its device ("mlx5_1 port 1
// (rail 1)").
std::vector<HealthFinding> judge_port_change(const std::string& host,
                                             const std::vector<RdmaPort>& before,
                                             const std::vector<RdmaPort>& after,
                                             const std::vector<std::string>& rail_nics = {},
                                             const std::string& during = "during the load");

// " (rail 1)", " (rails 0 and 4)" for the local ranks whose NIC is `device`; "" for none.
std::string rails_of_device(const std::string& device, const std::vector<std::string>& rail_nics);

}  // namespace tp
