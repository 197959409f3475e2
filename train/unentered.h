#pragma once
// Which collective some ranks never entered, from every rank's published sequence numbers
// (mpi/collective_ledger.h; docs/drills.md, "Which collective a hang is in"). At thousands of
// ranks, "rank 3 stopped" is half the answer; the other half is the communicator, the operation
// and the size the job is stuck in, so a site can tell a hung allreduce from a rank that never
// reached the alltoall. Pure: the same records always give the same answer.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "train/heartbeat.h"

namespace tp {

struct Unentered {
  std::string comm;  // the communicator's label ("world", "world:3"; "/p2p" for a pair's transfer)
  int64_t seq = 0;   // the first sequence number some ranks never entered (a pair's count, p2p)
  std::string op;    // "" when no rank that entered it still remembers it
  int64_t bytes = -1;
  // The ranks that did not enter it and are in no collective of this communicator: they never
  // came (stopped short, or busy elsewhere).
  std::vector<int> ranks;
  std::vector<std::string> hosts;  // their hosts, one each, in the same order
  // The ranks that did not enter it because they are still inside the one before: they wait,
  // as the ranks that entered it do, most often for a rank in `ranks` (or a stopped one).
  std::vector<int> inside_previous;
  std::vector<int> waiting;  // ranks that entered it (p2p: the peers waiting on them)
};

// The stuck collective, or nothing when every rank of every communicator entered the same
// number. Among several, the one the most ranks wait in; point-to-point only where no
// collective has one. O(ranks x communicators per rank).
std::optional<Unentered> first_unentered(const std::vector<HeartbeatRecord>& records);

// "world seq 7 (allreduce, 4096 B) was not entered by rank 3 on node-b"
std::string unentered_text(const Unentered& u);

}  // namespace tp
