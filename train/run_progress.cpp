#include "train/run_progress.h"

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/files.h"

namespace tp {

RunProgress::RunProgress(const std::string& heartbeat_dir, int rank, int world_size,
                         const std::optional<CheckpointRestore>& restored)
    : path_(heartbeat_dir + "/progress.json"),
      writes_(rank == 0),
      world_size_(world_size),
      restored_(restored) {
  write();
}

void RunProgress::step_ended() {
  if (first_step_end_unix_ != 0) return;
  first_step_end_unix_ = unix_seconds();
  write();
}

void RunProgress::write() const {
  if (!writes_) return;
  using nlohmann::json;
  // The world sizes say whether a relaunch after a lost node resized (docs/drills.md).
  const json progress{
      {"world_size", world_size_},
      {"written_world_size", restored_ ? json(restored_->written_world_size) : json(nullptr)},
      {"restored_step", restored_ ? json(restored_->step) : json(nullptr)},
      {"restore_seconds", restored_ ? json(restored_->seconds) : json(nullptr)},
      {"restore_gbps", restored_ ? json(restored_->gbps()) : json(nullptr)},
      {"first_step_end_unix",
       first_step_end_unix_ > 0 ? json(first_step_end_unix_) : json(nullptr)}};
  try {
    write_file_atomically(path_, progress.dump() + "\n");
  } catch (const std::exception&) {
    // Progress serves a drill; a run without a drill goes on without it.
  }
}

}  // namespace tp
