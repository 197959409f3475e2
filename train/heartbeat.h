#pragma once
// Per-rank heartbeats: each rank overwrites one small file with the step and phase it has entered.
// They are the watchdog's evidence: when a collective times out, the ranks whose heartbeat is
// behind this rank's are the ones that did not arrive. Files live in a folder all ranks can see
// (the report's folder by default), so they work across nodes on shared storage.
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace tp {

struct HeartbeatRecord {
  int rank = -1;
  int64_t step = 0;
  std::string phase;
  std::string host;
  double unix_time = 0;
  bool present = false;  // false when the rank never wrote one
};

class Heartbeat {
 public:
  Heartbeat(std::string dir, int rank, std::string host);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // One pwrite of a fixed-size record; no fsync (the evidence is read on the same run).
  void beat(int64_t step, const char* phase);
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

  static std::vector<HeartbeatRecord> read_all(const std::string& dir, int world_size);
  // Ranks behind `me` (an earlier step, or the same step in an earlier phase), or absent.
  static std::vector<HeartbeatRecord> behind(const std::vector<HeartbeatRecord>& all,
                                             const HeartbeatRecord& me);

 private:
  std::string pid_path() const;

  std::string dir_, host_;
  int rank_;
  int fd_ = -1;
  // Phases are string literals, so the pointer stays valid.
  std::atomic<int64_t> last_step_{0};
  std::atomic<const char*> last_phase_{"start"};
  std::atomic<double> last_beat_s_{0};
};

// Order of phases within a step, for comparing heartbeats.
int phase_order(const std::string& phase);
// Where rank `rank` keeps its heartbeat record in the heartbeat folder `dir`.
std::string heartbeat_path(const std::string& dir, int rank);

// Writes <dir>/abort.json naming the ranks that did not arrive, and returns a one-line summary.
std::string write_abort_record(const std::string& dir, const std::string& what,
                               const HeartbeatRecord& me,
                               const std::vector<HeartbeatRecord>& missing);

}  // namespace tp
