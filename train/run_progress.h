#pragma once
// Rank 0 leaves the run's progress beside the heartbeats (progress.json), where a drill reads it
// even when the run dies later: what it restored, and when its first step completed (the end of a
// drill's recovery time). docs/drills.md.
#include <optional>
#include <string>

#include "checkpoint/store.h"

namespace tp {

class RunProgress {
 public:
  // Writes the record at once (no step completed yet) on rank 0; other ranks write nothing.
  RunProgress(const std::string& heartbeat_dir, int rank, int world_size,
              const std::optional<CheckpointRestore>& restored);
  // Call at the end of every step: the first call stamps the wall clock and rewrites the record.
  void step_ended();
  // Wall clock (unix seconds) when this process completed its first step, or 0.
  double first_step_end_unix() const { return first_step_end_unix_; }

 private:
  void write() const;

  std::string path_;
  bool writes_;
  int world_size_;
  std::optional<CheckpointRestore> restored_;
  double first_step_end_unix_ = 0;
};

}  // namespace tp
