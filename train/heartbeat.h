#pragma once
// Per-rank heartbeats: each rank overwrites one small file with the step and phase it has entered,
// and its watchdog thread advances a liveness counter in the same file. They are the watchdog's
// evidence of who a stalled job waits for (train/culprits.h). Files live in a folder all ranks can
// see (the report's folder by default), so they work across nodes on shared storage.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "mpi/comm_deadline.h"

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
};

class Heartbeat {
 public:
  Heartbeat(std::string dir, int rank, std::string host);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // One pwrite of a fixed-size record; no fsync (the evidence is read on the same run).
  void beat(int64_t step, const char* phase);
  // Every later beat also restarts `deadline`'s count (mpi/comm_deadline.h), as it restarts the
  // watchdog's. Called before anything waits on it.
  void report_progress_to(std::shared_ptr<CommDeadline> deadline);
  // A run that ended normally leaves no heartbeats behind (an abort.json stays).
  void finish();
  // Rank 0, once the job ends cleanly: removes the folder unless a watchdog left abort.json in it.
  // A folder the run made beside its report goes with every rank's files, fired-fault records
  // and the progress record; one given as watchdog.dir belongs to whoever named it (a drill reads
  // progress.json there) and goes only when nothing else is left in it.
  void remove_folder(bool made_by_this_run) const;
  const std::string& dir() const { return dir_; }
  // This rank's last beat, from memory (thread-safe): the watchdog's view of its own progress.
  HeartbeatRecord latest() const;
  double last_beat_steady_s() const { return last_beat_s_.load(); }
  // The watchdog thread, while it runs: advances the liveness counter in this rank's file. Not
  // moving, it says the whole process stopped (a stopped process runs no thread at all).
  void tick();
  // The watchdog thread, when it stops on purpose: the counter stops moving, and says why.
  void end_watch();

  static std::vector<HeartbeatRecord> read_all(const std::string& dir, int world_size);
  static HeartbeatRecord read_one(const std::string& dir, int rank);
  // Whether this process can read `rank`'s heartbeat in `dir`, retrying for up to `retry_s` (NFS
  // caches a folder's attributes for seconds): a folder some node does not share.
  static bool readable_within(const std::string& dir, int rank, double retry_s);

 private:
  std::string pid_path() const;

  std::string dir_, host_;
  int rank_;
  int fd_ = -1;
  // Phases are string literals, so the pointer stays valid.
  std::atomic<int64_t> last_step_{0};
  std::atomic<const char*> last_phase_{"start"};
  std::atomic<double> last_beat_s_{0};
  std::shared_ptr<CommDeadline> deadline_;  // set once, by the watchdog, before it starts
  // The watchdog thread's counter, and the file descriptor as finish() may close it meanwhile.
  std::mutex liveness_mutex_;
  int64_t liveness_ = 0;
};

// Order of phases within a step, for comparing heartbeats.
int phase_order(const std::string& phase);
// Where rank `rank` keeps its heartbeat record in the heartbeat folder `dir`.
std::string heartbeat_path(const std::string& dir, int rank);

}  // namespace tp
