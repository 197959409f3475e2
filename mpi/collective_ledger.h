#pragma once
// Sequence numbers for the collectives trainproof posts (docs/drills.md, "Which collective a hang
// is in"). Every operation run through a Collective gets the next number of its communicator;
// this rank records the last number it entered and the last it saw complete, with the few calls
// before them (operation and size). The heartbeat publishes the record with the rank's beat, so a
// watchdog reading every node's file can tell which collective some ranks never entered
// (train/unentered.h).
//
// Point-to-point transfers (sendrecv, the pairwise pass) are not collective: two ranks take part
// and the others may not. They are numbered per pair instead, and recorded under the
// communicator's label with "/p2p" and the peer of the last call.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "mpi/collective.h"
#include "mpi/comm_timings.h"

namespace tp {

// Communicators one rank records (the most recently made replace the oldest), and calls
// remembered per communicator.
inline constexpr int kLedgerComms = 4;
inline constexpr int kLedgerRecent = 4;
// A label is at most this long; longer ones are cut.
inline constexpr size_t kLedgerLabelBytes = 24;

struct LedgerCall {
  int64_t seq = 0;  // 0: none
  CollectiveOp op = CollectiveOp::allreduce;
  int64_t bytes = 0;  // the larger of what this rank sends and receives
};

// One communicator's progress on this rank.
struct CommProgress {
  std::string label;    // "world", "world:3" (split by color 3), "world/p2p"
  int64_t entered = 0;  // the last sequence number this rank entered (0: none yet)
  int64_t completed = 0;
  int peer = -1;  // p2p: the peer of the last call, whose pair count `entered` is
  std::array<LedgerCall, kLedgerRecent> recent{};  // the last calls entered, newest first
  bool empty() const { return label.empty(); }
};

const char* op_name(CollectiveOp op);
// The operation named `name` (as op_name writes it); false when there is none.
bool op_from_name(const std::string& name, CollectiveOp& op);

// Where a rank's ledger is published: its heartbeat (train/heartbeat.h).
class LedgerSink {
 public:
  virtual ~LedgerSink() = default;
  virtual void publish(int index, const CommProgress& progress) = 0;
};

// This process's ledger: the communicators' records, by index, and the sink they go to.
class CollectiveLedger {
 public:
  // A slot for a communicator labelled `label` (the oldest is reused past kLedgerComms).
  int add(const std::string& label);
  void entered(int index, int64_t seq, CollectiveOp op, int64_t bytes, int peer = -1);
  void completed(int index, int64_t seq);
  // From now on, records go to `sink`; every record so far is published to it at once. A stage's
  // heartbeat inside another's takes over until it detaches; the outer one then has them again.
  void attach(LedgerSink* sink);
  void detach(LedgerSink* sink);
  std::vector<CommProgress> snapshot() const;

 private:
  void publish_locked(int index);
  mutable std::mutex mutex_;
  std::array<CommProgress, kLedgerComms> comms_{};
  int added_ = 0;
  std::vector<LedgerSink*> sinks_;  // the newest heartbeat gets the records
};

CollectiveLedger& process_ledger();

// Wraps `inner` so every operation it runs is numbered on `ledger` under `label`, and its splits
// are too (labelled "<label>:<color>"), and timed into `times` (mpi/comm_timings.h): each split's
// set-up, the first call of each operation (waited for on its own, so it is timed alone), and
// the later ones as the mean of each batch up to its completion. `before_enter(label, seq)`, when
// set, runs before each numbered collective is entered (the test.hold_collective hook).
std::unique_ptr<Collective> with_sequence_numbers(
    std::unique_ptr<Collective> inner, const std::string& label, CollectiveLedger& ledger,
    std::function<void(const std::string&, int64_t)> before_enter = nullptr,
    CommTimeLog& times = process_comm_times());

}  // namespace tp
