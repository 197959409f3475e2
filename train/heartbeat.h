#pragma once
// Per-rank heartbeats: each rank records the step and phase it has entered, and its watchdog
// thread advances a liveness counter beside them. They are the watchdog's evidence of who a
// stalled job waits for (train/culprits.h), read across nodes from a folder every node sees (the
// report's folder by default).
//
// A rank writes its heartbeat into node-local memory (train/node_region.h), never to the folder:
// one file per node there, beats-<first rank of the node>, holds every rank of the node, and
// whichever rank finds it due rewrites it, at most once per publish interval (1 s at the default
// timeouts). The shared storage sees one small write per node per second, whatever the ranks per
// node, and a rank that stops is still named: its slot stops moving while its node's other ranks
// publish it (docs/drills.md, "Heartbeats").
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "mpi/comm_deadline.h"
#include "train/faults.h"
#include "train/node_region.h"

namespace tp {

struct HeartbeatRecord {
  int rank = -1;
  int64_t step = 0;
  std::string phase;
  std::string host;
  double unix_time = 0;
  bool present = false;  // false when the rank never wrote one
  // The rank's watchdog thread counts up while it runs; -1 until it has counted once.
  int64_t liveness = -1;
  bool watch_ended = false;  // its watchdog stopped counting on purpose (the job ended or aborted)
  std::vector<CommProgress> comms;  // its communicators' sequence numbers (mpi/collective_ledger.h)
};

// Where a rank's heartbeat lives on its node.
struct NodePlace {
  std::shared_ptr<NodeRegion> region;
  int slot = 0;               // this rank's slot in the region
  int node_first_rank = 0;    // names the node's file in the folder
  bool first_on_node = true;  // makes the node's file afresh
  double publish_every_s = 1.0;
};

class Heartbeat final : public LedgerSink {
 public:
  // A rank that is a node of its own, publishing every beat at once (tools and tests).
  Heartbeat(std::string dir, int rank, std::string host);
  Heartbeat(std::string dir, int rank, std::string host, NodePlace place);
  ~Heartbeat() override;
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // Writes step and phase into this rank's slot: memory only, unless the node's file is due.
  void beat(int64_t step, const char* phase);
  // Every later beat also restarts `deadline`'s count (mpi/comm_deadline.h), as it restarts the
  // watchdog's. Called before anything waits on it.
  void report_progress_to(std::shared_ptr<CommDeadline> deadline);
  // How often the node's file may be rewritten; the watchdog sets it from its timeout.
  void set_publish_interval(double seconds) { publish_every_s_.store(seconds); }
  // Rewrites the node's file now (set-up: the visibility check reads it next).
  void publish_now();
  // A run that ended normally leaves no heartbeats behind (an abort.json stays): the last rank of
  // the node to finish removes the node's file.
  void finish();
  // Rank 0, once the job ends cleanly: removes the folder unless a watchdog left abort.json in it.
  // A folder the run made beside its report goes with every node's files, fired-fault records
  // and the progress record; one given as watchdog.dir belongs to whoever named it (a drill reads
  // progress.json there) and goes only when nothing else is left in it.
  void remove_folder(bool made_by_this_run) const;
  const std::string& dir() const { return dir_; }
  // This rank's last beat, from memory (thread-safe): the watchdog's view of its own progress.
  HeartbeatRecord latest() const;
  double last_beat_steady_s() const { return last_beat_s_.load(); }
  // The watchdog thread, while it runs: advances the liveness counter in this rank's slot. Not
  // moving, it says the whole process stopped (a stopped process runs no thread at all).
  void tick();
  // The watchdog thread, when it stops on purpose: the counter stops moving, and says why.
  void end_watch();
  // The process's collective ledger writes here (main thread): into this rank's slot only.
  void publish(int index, const CommProgress& progress) override;
  // Every rank of this node that shares its memory, with its process id: whom a node fault
  // kills (train/faults.h). Node-local: no file or message.
  std::vector<NodeProcess> node_processes() const;

  // Every rank's record, indexed by rank, from the nodes' files: one read per node.
  static std::vector<HeartbeatRecord> read_all(const std::string& dir, int world_size);
  // Rank `rank`'s record; its node's file is read first when `rank` is the node's first rank.
  static HeartbeatRecord read_one(const std::string& dir, int rank);
  // One more than the highest rank any node's file holds (0 for none): the job's size.
  static int ranks_in(const std::string& dir);
  // Whether this process can read `rank`'s heartbeat in `dir`, retrying for up to `retry_s` (NFS
  // caches a folder's attributes for seconds): a folder some node does not share.
  static bool readable_within(const std::string& dir, int rank, double retry_s);

 private:
  std::string pid_path() const;
  // Under liveness_mutex_: rewrites the node's file when it is due, or at once when `force`.
  void publish_locked(bool force);

  std::string dir_, host_;
  int rank_;
  NodePlace place_;
  BeatSlot& slot_;
  int fd_ = -1;  // the node's file
  std::atomic<double> publish_every_s_;
  // Phases are string literals, so the pointer stays valid.
  std::atomic<int64_t> last_step_{0};
  std::atomic<const char*> last_phase_{"start"};
  std::atomic<double> last_beat_s_{0};
  std::shared_ptr<CommDeadline> deadline_;  // set once, by the watchdog, before it starts
  // The watchdog thread's writes, the main thread's publishes and finish() take turns.
  std::mutex liveness_mutex_;
  bool finished_ = false;
};

// Order of phases within a step, for comparing heartbeats.
int phase_order(const std::string& phase);
// The file of the node whose first rank is `node_first_rank`, in the heartbeat folder `dir`.
std::string node_beats_path(const std::string& dir, int node_first_rank);

}  // namespace tp
