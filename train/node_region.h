#pragma once
// The heartbeats of one node's ranks in node-local memory: a small shared mapping with one slot per
// rank of the node. Each rank writes only its own slot; whichever rank's watchdog finds the node's
// heartbeat file due publishes every slot at once (train/heartbeat.h), so the writes to the shared
// folder are bounded per node, not per rank (docs/drills.md, "Heartbeats").
//
// The mapping lives in /dev/shm (or the temporary folder where a host has none) only until every
// rank of the node has mapped it: the node's first rank then unlinks the name, so a job that dies
// leaves nothing behind in node memory.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "mpi/collective_ledger.h"

namespace tp {

// One communicator's progress on a rank (mpi/collective_ledger.h), in shared memory: the label
// as NUL-padded words, the numbers as they are. Written under the slot's `comm_version`.
struct CommSlot {
  std::atomic<uint64_t> label[kLedgerLabelBytes / 8];
  std::atomic<int64_t> entered{0}, completed{0};
  std::atomic<int32_t> peer{-1};
  std::atomic<int64_t> recent_seq[kLedgerRecent];
  std::atomic<int32_t> recent_op[kLedgerRecent];
  std::atomic<int64_t> recent_bytes[kLedgerRecent];
};

// One rank's heartbeat, written by that rank alone. `version` is a sequence lock: odd while its
// owner writes step, phase and time, so a publisher never copies half a beat.
struct alignas(64) BeatSlot {
  std::atomic<uint64_t> version{0};
  std::atomic<int64_t> step{0};
  std::atomic<int32_t> phase{0};  // an index into the phase names (train/heartbeat.cpp)
  std::atomic<int32_t> rank{-1};  // -1 until the slot's rank first beats
  std::atomic<double> unix_time{0};
  std::atomic<int64_t> liveness{-1};  // the rank's watchdog counts up; -1 until it counts once
  std::atomic<int32_t> watch_ended{0};
  std::atomic<int32_t> pid{0};  // the rank's process: a node fault kills every one of them
  // A second sequence lock, for the communicators' records: odd while one changes.
  std::atomic<uint64_t> comm_version{0};
  CommSlot comms[kLedgerComms];
};

// The node's shared state besides the slots: who publishes, and when the last publish was.
struct alignas(64) RegionHeader {
  std::atomic<uint64_t> magic{0};
  std::atomic<int32_t> slots{0};
  // Ranks that mapped the region and have not finished (join); the last one removes the file.
  std::atomic<int32_t> active{0};
  std::atomic<double> published_s{-1e30};  // steady clock of the last publish
  std::atomic<double> claimed_s{0};        // steady clock of the publisher's claim; 0 when free
};

static_assert(
    std::atomic<double>::is_always_lock_free && std::atomic<int64_t>::is_always_lock_free,
    "the node's heartbeats are shared between processes: their atomics must be lock-free");

class NodeRegion {
 public:
  // A region of `slots` slots named `path`, which must not exist (the node's first rank).
  static std::shared_ptr<NodeRegion> create(const std::string& path, int slots);
  // The region `path` another rank of this node created; nullptr when this process cannot map it
  // (a container with a /dev/shm of its own): the rank then publishes a node file of its own.
  static std::shared_ptr<NodeRegion> attach(const std::string& path, int slots);
  // A region of this process only: a rank that is a node of its own (tools and tests).
  static std::shared_ptr<NodeRegion> private_region(int slots);
  ~NodeRegion();
  NodeRegion(const NodeRegion&) = delete;
  NodeRegion& operator=(const NodeRegion&) = delete;

  RegionHeader& header() { return *header_; }
  BeatSlot& slot(int index) { return slots_[index]; }
  int slots() const { return header_->slots.load(); }

  // A rank that will publish through this region counts itself in, before any rank can finish.
  void join() { header_->active.fetch_add(1); }
  // Takes the right to publish, with `now_s` as the claim's token; false while another rank
  // publishes. A claim older than `stale_s` is taken over: a publisher stopped in the middle does
  // not silence its node.
  bool claim(double now_s, double stale_s);
  // Whether the claim `token` is still this publisher's (it was not taken over).
  bool holds(double token) const { return header_->claimed_s.load() == token; }
  // Gives the claim `token` back and records the publish, unless it was taken over meanwhile:
  // a publisher that resumes late never frees another's claim.
  void release(double token, double now_s);

 private:
  NodeRegion(void* base, size_t bytes);
  void* base_;
  size_t bytes_;
  RegionHeader* header_;
  BeatSlot* slots_;
};

// Where a node's region is made: /dev/shm, or the temporary folder where a host has none.
std::string node_memory_folder();

}  // namespace tp
