#pragma once
// accept's restore stage (docs/acceptance.md, "Stages"): the last checkpoint train committed,
// read cold into a model started afresh, must hold the final state bit for bit on every rank.
#include <nlohmann/json.hpp>

#include "app/stages/train_stage.h"

namespace tp {

struct RestoreStage {
  nlohmann::json section;  // rank 0: the report's `restore` section
  nlohmann::json checks;   // rank 0: restore_digest
};

// Collective. `trained` is this rank's result of the train stage.
RestoreStage restore_stage(const TrainConfig& config, const World& world,
                           const TrainStage& trained);

// Pure: the restore_digest check from what every rank found ([rank]: "" or what differed).
nlohmann::json restore_digest_check(const std::vector<std::string>& problems, int64_t step);

}  // namespace tp
