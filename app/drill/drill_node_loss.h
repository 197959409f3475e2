#pragma once
// What a drill decides after it lost a node, and whether its bit-exact proof holds across the
// resize that followed (docs/drills.md, "Losing a node"). Pure: read from heartbeats and reports.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/drill/drill_launcher.h"
#include "app/drill/drill_records.h"
#include "train/heartbeat.h"

namespace tp {

// The world of a launch, from its heartbeats: every rank that beat, on how many hosts; `excluded`
// is carried over from the launch before.
LaunchShape launch_shape(const std::vector<HeartbeatRecord>& heartbeats,
                         std::vector<std::string> excluded);

// The ranks a node loss took: those the failure names, or every rank whose heartbeat was on the
// lost host, whichever is more.
int lost_rank_count(const DrillFailure& failure, const std::vector<HeartbeatRecord>& heartbeats);

// Empty when the final digest must equal the reference's; otherwise why it cannot by
// construction: the final run ran at another world size, and the global batch followed the world
// size (model.batch_per_rank with nothing restored), data.rank_shift hands ranks each other's
// shards, or the ranks ran on more than one CPU model. `reference` may be null (a given
// drill.reference_digest): the first failure's world size stands for it.
std::string proof_not_applicable(const nlohmann::json& reference, const nlohmann::json& final_run,
                                 const std::vector<DrillFailure>& failures);

// One line for the drill's output on how it relaunches after a lost node.
std::string node_loss_line(const DrillFailure& failure, int lost_ranks, const LaunchShape& after);

}  // namespace tp
