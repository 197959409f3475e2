#include "app/accept/accept_restore.h"

#include <spdlog/spdlog.h>

#include "app/report/gate.h"
#include "app/stages/backend_selection.h"
#include "app/stages/train_setup.h"
#include "mpi/clock_sync.h"
#include "mpi/gather.h"
#include "train/checkpoint_driver.h"

namespace tp {
namespace {

using nlohmann::json;

// This rank's finding: "" when the restored state is the trained one.
std::string compare_with_training(const std::optional<CheckpointRestore>& restored,
                                  const Digest128& digest, const TrainStage& trained,
                                  const World& world) {
  const std::string who = "rank " + std::to_string(world.rank) + " (" + world.host + ")";
  if (!restored) return who + ": no checkpoint in the folder verified";
  if (restored->step != trained.last_step)
    return who + ": the newest checkpoint that verified is step " + std::to_string(restored->step) +
           ", not the last step " + std::to_string(trained.last_step);
  if (digest != trained.digest)
    return who + ": restored state " + digest.hex() + " differs from the trained state " +
           trained.digest.hex();
  return "";
}

json section_of(const CheckpointRestore& r, const TrainConfig& cfg) {
  return {{"step", r.step},
          {"folder", r.folder},
          {"bytes", r.bytes},
          {"seconds", r.seconds},
          {"gbps", r.gbps()},
          {"rank_gbps", {{"min", r.rank_gbps_min}, {"max", r.rank_gbps_max}}},
          {"cold_read", cfg.checkpoint_cold_read},
          {"rejected", r.rejected}};
}

}  // namespace

json restore_digest_check(const std::vector<std::string>& problems, int64_t step) {
  std::string first;
  int wrong = 0;
  for (const std::string& p : problems)
    if (!p.empty()) {
      if (first.empty()) first = p;
      ++wrong;
    }
  return gate_check("restore_digest", wrong, 0, wrong == 0 ? "pass" : "fail",
                    wrong == 0 ? "every rank restored step " + std::to_string(step) +
                                     " bit for bit from a cold read"
                               : std::to_string(wrong) + " rank(s) differ; first: " + first);
}

RestoreStage restore_stage(const TrainConfig& trained_cfg, const World& world,
                           const TrainStage& trained) {
  TrainConfig cfg = trained_cfg;
  cfg.resume = "require";
  cfg.checkpoint_cold_read = true;  // storage, not the page cache train left warm
  cfg.faults.clear();
  // The dataset's shape comes from its index, as training read it: the checkpoint's scenario hash
  // holds it, so the restore must hash the same shape.
  reconcile_dataset(cfg, world);
  Backends backends = select_backends(cfg, world, nullptr);
  initialize_model(cfg, world, backends,
                   batch_share(cfg.model.global_batch, world.size, world.rank));
  AlignedClock clock;
  clock.align(world.comm);
  FaultInjector no_faults({}, world.rank, world.host, "");
  std::optional<CheckpointRestore> restored;
  {
    CheckpointDriver driver(cfg, world, clock, no_faults, [](int64_t) { return json::object(); });
    restored = driver.restore(*backends.compute);
  }
  const std::string mine =
      compare_with_training(restored, backends.compute->state_digest(), trained, world);
  const std::vector<std::string> problems = gather_records_at_root(world, mine);
  RestoreStage stage;
  if (world.rank == 0) {
    stage.section = restored ? section_of(*restored, cfg) : json(nullptr);
    stage.checks = json::array({restore_digest_check(problems, trained.last_step)});
    if (restored)
      spdlog::info("restore: step {} read cold in {:.3f} s ({:.3g} GB/s)", restored->step,
                   restored->seconds, restored->gbps());
  }
  return stage;
}

}  // namespace tp
