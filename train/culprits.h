#pragma once
// Who a stalled job waits for, from every rank's heartbeat read twice. Whichever rank's watchdog
// fires first (and the NCCL deadline) applies the same rule to the same evidence, so every rank
// that looks names the same ranks:
//   1. A rank whose liveness counter did not move between the two reads is stopped or dead: its
//      watchdog thread stopped with it. A rank without a heartbeat did not start. When there are
//      such ranks, they are the culprits, and only they: the ranks blocked behind them are alive.
//   2. Otherwise every rank is alive, and the culprits are the ranks behind the furthest rank's
//      step and phase: a rank whose step is stuck while its watchdog still runs (a hang).
// Heartbeats alone cannot name a rank stopped in comm: it leaves the same step and phase as every
// rank blocked behind it. The counters need no clock: each is compared with itself.
#include <string>
#include <vector>

#include "train/heartbeat.h"
#include "train/unentered.h"

namespace tp {

struct Culprit {
  enum class Why { stopped, no_heartbeat, behind };
  HeartbeatRecord last;  // from the second read
  Why why = Why::behind;
};
const char* why_name(Culprit::Why why);

struct Verdict {
  std::vector<Culprit> culprits;  // by rank
  HeartbeatRecord furthest;       // the rank furthest ahead (the lowest rank of a tie)
  // The collective some ranks never entered, from the second read (train/unentered.h).
  std::optional<Unentered> unentered;
};

// `first` and `second`: every rank's record, indexed by rank, read a liveness window apart
// (liveness_window_s). Pure: the same records always give the same verdict.
Verdict name_culprits(const std::vector<HeartbeatRecord>& first,
                      const std::vector<HeartbeatRecord>& second);

// Writes <dir>/abort.json naming the culprits, unless a rank that looked first wrote it already:
// the first verdict stands (a launcher ending the job may let a stopped rank go on, and a later
// look would see it move). Returns a one-line summary of the verdict that stands. `me`: the rank
// that detected the stall.
std::string write_abort_record(const std::string& dir, const std::string& what,
                               const HeartbeatRecord& me, const Verdict& verdict);

}  // namespace tp
