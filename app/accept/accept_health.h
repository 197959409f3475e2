#pragma once
// accept reads each node's machine and GPU driver on the node's first rank (docs/node-check.md,
// "Change over a load"): in the preflight, where its inventory and each GPU's health at rest are
// judged, and at the end of every stage, where what rose during that stage is judged. Rank 0
// gathers one small record per rank (the others' empty) once per check, so its work and memory
// grow with the job alone, and no node reads another's counters.
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "gpu/driver_view.h"
#include "gpu/nvml_watch.h"
#include "mpi/world.h"
#include "node/gpu_health.h"
#include "node/inventory_spec.h"
#include "node/machine_facts.h"
#include "train/train_config.h"

namespace tp {

// What a node's first rank read of its node; `taken` is false on every other rank.
struct NodeRead {
  bool taken = false;
  MachineRoots roots;
  MachineFacts machine;  // machine.host: the name the job knows the node by
  DriverView driver;     // with the NCCL library's version
};

// Every rank: its node's read when it is the node's first rank. `after_load` reads
// test.sysfs_root_after where the test hooks give one.
NodeRead read_this_node(const TestHooks& test, const World& world, bool after_load);

// One node's findings of one check, as its first rank judged them.
struct NodeHealthRecord {
  std::string host;     // "" on a rank that is not its node's first
  bool judged = false;  // something could be read to judge
  std::string why_not;  // when not judged
  std::vector<HealthFinding> findings;
};
void to_json(nlohmann::json& j, const NodeHealthRecord& r);
void from_json(const nlohmann::json& j, NodeHealthRecord& r);

struct HealthStage {
  nlohmann::json check;                                          // gate.checks[] entry
  std::vector<std::pair<std::string, nlohmann::json>> findings;  // (host, nodes[].findings[])
};

// Pure, on rank 0: the check `name` and each node's findings from every rank's record.
// `healthy` says what a pass means ("every GPU healthy at rest").
HealthStage judge_node_health(const std::string& name, const std::vector<NodeHealthRecord>& all,
                              const std::string& healthy);

// Every rank calls both; rank 0 returns the judged stage.
// gpu_health: each GPU's health at rest in `read` (node/gpu_health.h).
HealthStage gpu_health_stage(const NodeRead& read, const World& world);
// Every rank: the NIC each rank's traffic leaves by (fabric/rank_nic.h), at its node's first rank
// by local rank, for naming a port's rails; empty elsewhere.
std::vector<std::string> rail_nics_on_node(const TestHooks& test, const World& world, bool nccl);

// What rose on a node, stage by stage (node/health_change.h): each stage is judged between the
// read at its start and the read at its end, so a finding names its stage ("during the train
// stage"). Kept on the node's first rank and gathered once, at the end.
struct NodeChanges {
  NodeRead last;  // the read the next stage starts from
  bool judged = false;
  std::vector<HealthFinding> findings;
};

// Every rank: judges what rose on its node from `changes.last` to `now` as `stage`'s, a port's
// findings named with the rails of `rail_nics` that use it, and starts the next from `now`.
void add_stage_change(NodeChanges& changes, NodeRead now, const std::vector<std::string>& rail_nics,
                      const std::string& stage);

// Every rank: health_change from every node's changes; rank 0 returns the judged stage.
HealthStage health_change_stage(const NodeChanges& changes, const World& world);

// A node's first rank watches its GPUs through NVML from the preflight to the last stage's end
// (docs/node-check.md, "Health during a load"): clock reasons, the PCIe link while busy, XIDs.
struct NodeWatch {
  std::unique_ptr<NvmlWatch> watch;  // none on other ranks, or where the driver lists no GPU
  std::chrono::steady_clock::time_point started;
};
NodeWatch start_node_watch(const NodeRead& read, double interval_s);

struct LoadStages {
  HealthStage load_health, xid;
};
// Every rank: stops the watch and judges each node's load_health (clock reasons over the
// samples, the link in busy samples, a watch stuck in the driver) and xid (NVML's events during
// the stages and the kernel log's records since the watch began), with the host file's [health]
// rules. Rank 0 returns the judged stages.
LoadStages load_health_stages(NodeWatch& watch, const NodeRead& after, const InventorySpec& spec,
                              const World& world);

}  // namespace tp
