#include "train/heartbeat.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include "common/clock.h"
#include "common/crash_report.h"
#include "common/errors.h"
#include "common/sysinfo.h"

namespace tp {
namespace {

namespace fs = std::filesystem;

// One line per rank in a node's file, at a fixed place: "rank step phase host unix_time alive N
// [ended]", then a word per communicator it records (comm_word), padded with spaces. A slot no rank
// has beaten in is a blank line.
constexpr size_t kLineBytes = 640;
constexpr const char* kNodeFilePrefix = "beats-";
// The phases a slot can hold, by index; a name outside the list is stored as "unknown".
constexpr const char* kPhases[] = {"start",     "data",       "compute", "comm",
                                   "optimizer", "checkpoint", "done",    "preflight",
                                   "sweep",     "pairwise",   "restore", "unknown"};
constexpr int kPhaseCount = int(sizeof kPhases / sizeof kPhases[0]);

int phase_index(const char* phase) {
  for (int i = 0; i + 1 < kPhaseCount; ++i)
    if (std::strcmp(phase, kPhases[i]) == 0) return i;
  return kPhaseCount - 1;
}

struct SlotCopy {
  int32_t rank = -1;
  int64_t step = 0, liveness = -1;
  int32_t phase = 0;
  double unix_time = 0;
  bool ended = false;
  std::vector<CommProgress> comms;
};

void store_comm(CommSlot& slot, const CommProgress& c) {
  char label[kLedgerLabelBytes] = {};
  std::memcpy(label, c.label.data(), std::min(c.label.size(), sizeof label));
  for (size_t w = 0; w < kLedgerLabelBytes / 8; ++w) {
    uint64_t word = 0;
    std::memcpy(&word, label + 8 * w, 8);
    slot.label[w].store(word);
  }
  slot.entered.store(c.entered);
  slot.completed.store(c.completed);
  slot.peer.store(c.peer);
  for (int i = 0; i < kLedgerRecent; ++i) {
    slot.recent_seq[i].store(c.recent[size_t(i)].seq);
    slot.recent_op[i].store(int32_t(c.recent[size_t(i)].op));
    slot.recent_bytes[i].store(c.recent[size_t(i)].bytes);
  }
}

CommProgress load_comm(const CommSlot& slot) {
  CommProgress c;
  char label[kLedgerLabelBytes + 1] = {};
  for (size_t w = 0; w < kLedgerLabelBytes / 8; ++w) {
    const uint64_t word = slot.label[w].load();
    std::memcpy(label + 8 * w, &word, 8);
  }
  c.label = label;
  c.entered = slot.entered.load();
  c.completed = slot.completed.load();
  c.peer = slot.peer.load();
  for (int i = 0; i < kLedgerRecent; ++i)
    c.recent[size_t(i)] = {slot.recent_seq[i].load(), CollectiveOp(slot.recent_op[i].load()),
                           slot.recent_bytes[i].load()};
  return c;
}

// The communicators' records, copied under their own sequence lock as copy_slot copies a beat.
std::vector<CommProgress> copy_comms(const BeatSlot& slot) {
  std::vector<CommProgress> comms;
  for (int attempt = 0; attempt < 100; ++attempt) {
    const uint64_t before = slot.comm_version.load();
    comms.clear();
    for (const CommSlot& c : slot.comms)
      if (CommProgress copy = load_comm(c); !copy.empty()) comms.push_back(std::move(copy));
    if (before % 2 == 0 && slot.comm_version.load() == before) break;
  }
  return comms;
}

// "comm=<label>,<entered>,<completed>,<peer>,<seq>:<op>:<bytes>/...": the label has no spaces
// or commas (the ledger's labels are made so).
std::string comm_word(const CommProgress& c) {
  std::string word = " comm=" + c.label + "," + std::to_string(c.entered) + "," +
                     std::to_string(c.completed) + "," + std::to_string(c.peer) + ",";
  bool first = true;
  for (const LedgerCall& call : c.recent) {
    if (call.seq <= 0) continue;
    word += (first ? "" : "/") + std::to_string(call.seq) + ":" + op_name(call.op) + ":" +
            std::to_string(call.bytes);
    first = false;
  }
  return word;
}

bool parse_comm_word(const std::string& word, CommProgress& c) {
  if (word.rfind("comm=", 0) != 0) return false;
  std::istringstream in(word.substr(5));
  std::string field, calls;
  if (!std::getline(in, c.label, ',')) return false;
  long long numbers[3] = {0, 0, -1};
  for (long long& n : numbers) {
    if (!std::getline(in, field, ',')) return false;
    n = std::atoll(field.c_str());
  }
  c.entered = numbers[0];
  c.completed = numbers[1];
  c.peer = int(numbers[2]);
  std::getline(in, calls);
  std::istringstream each(calls);
  for (size_t i = 0; i < c.recent.size() && std::getline(each, field, '/');) {
    const size_t a = field.find(':'), b = field.rfind(':');
    if (a == std::string::npos || a == b) continue;
    LedgerCall call;
    call.seq = std::atoll(field.substr(0, a).c_str());
    call.bytes = std::atoll(field.substr(b + 1).c_str());
    if (op_from_name(field.substr(a + 1, b - a - 1), call.op)) c.recent[i++] = call;
  }
  return !c.label.empty();
}

// A consistent copy of a slot its owner may be writing: retried while the sequence moves. Every
// access is sequentially consistent (no fences, which ThreadSanitizer cannot follow): a beat is a
// handful of stores per phase.
SlotCopy copy_slot(const BeatSlot& slot) {
  SlotCopy copy;
  // A writer stopped in the middle of a beat leaves the sequence odd: after the tries, the
  // fields as last read (the beat's step, phase or time, each whole) are the best there is.
  for (int attempt = 0; attempt < 100; ++attempt) {
    const uint64_t before = slot.version.load();
    copy.step = slot.step.load();
    copy.phase = slot.phase.load();
    copy.unix_time = slot.unix_time.load();
    if (before % 2 == 0 && slot.version.load() == before) break;
  }
  copy.rank = slot.rank.load();
  copy.liveness = slot.liveness.load();
  copy.ended = slot.watch_ended.load() != 0;
  copy.comms = copy_comms(slot);
  return copy;
}

void append_line(std::string& text, const SlotCopy& slot, const std::string& host) {
  char line[kLineBytes];
  std::memset(line, ' ', sizeof line);
  if (slot.rank >= 0) {
    const int phase = slot.phase >= 0 && slot.phase < kPhaseCount ? slot.phase : kPhaseCount - 1;
    int n = std::snprintf(line, sizeof line, "%d %lld %s %s %.6f alive %lld%s", slot.rank,
                          static_cast<long long>(slot.step), kPhases[phase], host.c_str(),
                          slot.unix_time, static_cast<long long>(slot.liveness),
                          slot.ended ? " ended" : "");
    // Each communicator's word while it fits whole; the line's end stays a newline.
    for (const CommProgress& c : slot.comms) {
      const std::string word = comm_word(c);
      if (n < 0 || size_t(n) + word.size() >= sizeof line - 1) break;
      std::memcpy(line + n, word.data(), word.size());
      n += int(word.size());
    }
    if (n > 0 && size_t(n) < sizeof line) line[n] = ' ';
  }
  line[sizeof line - 1] = '\n';
  text.append(line, sizeof line);
}

HeartbeatRecord parse_line(const std::string& line) {
  HeartbeatRecord h;
  std::istringstream in(line);
  long long step = 0, count = -1;
  std::string word, ended;
  if (!(in >> h.rank >> step >> h.phase >> h.host >> h.unix_time)) return HeartbeatRecord{};
  h.step = step;
  h.present = true;
  if (in >> word >> count && word == "alive") h.liveness = count;
  while (in >> word) {
    CommProgress c;
    if (word == "ended")
      h.watch_ended = true;
    else if (parse_comm_word(word, c))
      h.comms.push_back(std::move(c));
  }
  return h;
}

// Every record of the node file at `path`.
std::vector<HeartbeatRecord> read_node_file(const std::string& path) {
  std::ifstream file(path);
  std::vector<HeartbeatRecord> records;
  for (std::string line; std::getline(file, line);)
    if (HeartbeatRecord h = parse_line(line); h.present) records.push_back(std::move(h));
  return records;
}

// The nodes' files in `dir`.
std::vector<std::string> node_files(const std::string& dir) {
  std::vector<std::string> paths;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().filename().string().rfind(kNodeFilePrefix, 0) == 0)
      paths.push_back(entry.path().string());
  return paths;
}

}  // namespace

std::string node_beats_path(const std::string& dir, int node_first_rank) {
  char name[32];
  std::snprintf(name, sizeof name, "%s%06d", kNodeFilePrefix, node_first_rank);
  return dir + "/" + name;
}

int phase_order(const std::string& phase) {
  for (int i = 0; i < 7; ++i)
    if (phase == kPhases[i]) return i;
  return -1;
}

Heartbeat::Heartbeat(std::string dir, int rank, std::string host)
    : Heartbeat(std::move(dir), rank, std::move(host),
                NodePlace{NodeRegion::private_region(1), 0, rank, true, 0.0}) {}

Heartbeat::Heartbeat(std::string dir, int rank, std::string host, NodePlace place)
    : dir_(std::move(dir)),
      host_(std::move(host)),
      rank_(rank),
      place_(std::move(place)),
      slot_(place_.region->slot(place_.slot)),
      publish_every_s_(place_.publish_every_s) {
  std::error_code ec;
  fs::create_directory(dir_, ec);  // never its parents: a missing folder is an error
  // An earlier run's verdict in a reused folder is not this run's: the first verdict stands.
  if (rank_ == 0) fs::remove(dir_ + "/abort.json", ec);
  // This rank's crash record goes here from now on; one left by an earlier run is not this run's.
  set_crash_folder(dir_);
  fs::remove(dir_ + "/" + crash_record_name(rank_), ec);
  const int flags = O_WRONLY | O_CREAT | (place_.first_on_node ? O_TRUNC : 0);
  fd_ = ::open(node_beats_path(dir_, place_.node_first_rank).c_str(), flags, 0644);
  if (fd_ < 0) throw UsageError("watchdog.dir: cannot write heartbeats in '" + dir_ + "'");
  slot_.rank.store(rank_);
  slot_.pid.store(int32_t(::getpid()));
  beat(0, "start");
  process_ledger().attach(this);
  // Host and pid, so a drill can kill this process from outside (drill.external_kill).
  // The real host name, even when tests pretend otherwise: it is where the process is.
  std::ofstream(pid_path()) << host_name() << ' ' << ::getpid() << '\n';
}

Heartbeat::~Heartbeat() {
  process_ledger().detach(this);
  if (fd_ >= 0) ::close(fd_);
}

void Heartbeat::publish(int index, const CommProgress& progress) {
  if (index < 0 || index >= kLedgerComms) return;
  const uint64_t version = slot_.comm_version.load();
  slot_.comm_version.store(version + 1);
  store_comm(slot_.comms[index], progress);
  slot_.comm_version.store(version + 2);
}

void Heartbeat::beat(int64_t step, const char* phase) {
  // Odd while the fields change (copy_slot).
  const uint64_t version = slot_.version.load();
  slot_.version.store(version + 1);
  slot_.step.store(step);
  slot_.phase.store(phase_index(phase));
  slot_.unix_time.store(unix_seconds());
  slot_.version.store(version + 2);
  last_step_.store(step);
  last_phase_.store(phase);
  const double now = steady_seconds();
  last_beat_s_.store(now);
  if (deadline_) deadline_->mark_progress(now);
  std::lock_guard<std::mutex> guard(liveness_mutex_);
  publish_locked(false);
}

void Heartbeat::publish_locked(bool force) {
  if (fd_ < 0 || finished_) return;
  const double now = steady_seconds();
  const double every = publish_every_s_.load();
  NodeRegion& region = *place_.region;
  if (!force && now - region.header().published_s.load() < every) return;
  // A publisher stopped or killed mid-write is taken over two intervals on: well inside the
  // liveness window (three intervals or more), so its node's other ranks are not taken for
  // stopped with it.
  const double stale = std::max(0.1, 2 * every);
  for (int tries = 0; !region.claim(now, stale); ++tries) {
    if (!force || tries >= 50) return;  // another rank publishes the node: its file stays fresh
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::string text;
  text.reserve(size_t(region.slots()) * kLineBytes);
  for (int i = 0; i < region.slots(); ++i) append_line(text, copy_slot(region.slot(i)), host_);
  // Taken over while copying (this process was stopped): the newer publisher's file stands.
  if (!region.holds(now)) return;
  [[maybe_unused]] const ssize_t written = ::pwrite(fd_, text.data(), text.size(), 0);
  region.release(now, steady_seconds());
}

void Heartbeat::publish_now() {
  std::lock_guard<std::mutex> guard(liveness_mutex_);
  publish_locked(true);
}

HeartbeatRecord Heartbeat::latest() const {
  HeartbeatRecord me;
  me.rank = rank_;
  me.step = last_step_.load();
  me.phase = last_phase_.load();
  me.host = host_;
  me.unix_time = unix_seconds();
  me.present = true;
  return me;
}

void Heartbeat::tick() {
  std::lock_guard<std::mutex> guard(liveness_mutex_);
  if (finished_) return;
  const int64_t count = slot_.liveness.load();
  slot_.liveness.store(count < 0 ? 1 : count + 1);
  publish_locked(false);
}

void Heartbeat::end_watch() {
  std::lock_guard<std::mutex> guard(liveness_mutex_);
  slot_.watch_ended.store(1);
  publish_locked(true);
}

void Heartbeat::finish() {
  std::error_code ec;
  {
    // The watchdog thread may still tick: the run ends before its watchdog does.
    std::lock_guard<std::mutex> guard(liveness_mutex_);
    if (finished_) return;
    finished_ = true;
    // A rank whose run ended is no rank the others wait for, whoever publishes its slot now.
    slot_.watch_ended.store(1);
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Every other rank of the node has stopped publishing once it finished: the last one out
  // removes the node's file.
  if (place_.region->header().active.fetch_sub(1) == 1)
    fs::remove(node_beats_path(dir_, place_.node_first_rank), ec);
  fs::remove(pid_path(), ec);
}

std::vector<NodeProcess> Heartbeat::node_processes() const {
  std::vector<NodeProcess> processes;
  NodeRegion& region = *place_.region;
  for (int index = 0; index < region.slots(); ++index) {
    const BeatSlot& slot = region.slot(index);
    if (slot.rank.load() >= 0 && slot.pid.load() > 0)
      processes.push_back({slot.rank.load(), slot.pid.load()});
  }
  return processes;
}

std::string Heartbeat::pid_path() const {
  return dir_ + "/pid-rank-" + std::to_string(rank_);
}

void Heartbeat::remove_folder(bool made_by_this_run) const {
  std::error_code ec;
  if (fs::exists(dir_ + "/abort.json", ec)) return;
  for (const auto& entry : fs::directory_iterator(dir_, ec))
    if (entry.path().filename().string().rfind("crash-rank", 0) == 0) return;  // evidence
  if (made_by_this_run) {
    // Another rank may not have removed its own files yet; they are closed or about to be.
    for (const auto& entry : fs::directory_iterator(dir_, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind(kNodeFilePrefix, 0) == 0 || name.rfind("pid-rank-", 0) == 0 ||
          name.rfind("fault-rank-", 0) == 0 || name == "progress.json")
        fs::remove(entry.path(), ec);
    }
  }
  fs::remove(dir_, ec);  // fails, harmlessly, while anything else is left in it
}

void Heartbeat::report_progress_to(std::shared_ptr<CommDeadline> deadline) {
  deadline_ = std::move(deadline);
  if (deadline_) deadline_->mark_progress(last_beat_s_.load());
}

bool Heartbeat::readable_within(const std::string& dir, int rank, double retry_s) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(retry_s);
  for (;;) {
    if (read_one(dir, rank).present) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

std::vector<HeartbeatRecord> Heartbeat::read_all(const std::string& dir, int world_size) {
  std::vector<HeartbeatRecord> records(size_t(std::max(0, world_size)));
  for (int r = 0; r < world_size; ++r) records[size_t(r)].rank = r;
  for (const std::string& path : node_files(dir))
    for (HeartbeatRecord& h : read_node_file(path))
      if (h.rank >= 0 && h.rank < world_size && !records[size_t(h.rank)].present)
        records[size_t(h.rank)] = std::move(h);
  return records;
}

HeartbeatRecord Heartbeat::read_one(const std::string& dir, int rank) {
  for (HeartbeatRecord& h : read_node_file(node_beats_path(dir, rank)))
    if (h.rank == rank) return h;
  for (const std::string& path : node_files(dir))
    for (HeartbeatRecord& h : read_node_file(path))
      if (h.rank == rank) return h;
  HeartbeatRecord missing;
  missing.rank = rank;
  return missing;
}

int Heartbeat::ranks_in(const std::string& dir) {
  int ranks = 0;
  for (const std::string& path : node_files(dir))
    for (const HeartbeatRecord& h : read_node_file(path)) ranks = std::max(ranks, h.rank + 1);
  return ranks;
}

}  // namespace tp
