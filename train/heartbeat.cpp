#include "train/heartbeat.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include "common/clock.h"
#include "common/errors.h"
#include "common/sysinfo.h"

namespace tp {
namespace {

constexpr size_t kRecordBytes = 160;
// The liveness line follows the record, so the two threads never write the same bytes.
constexpr size_t kLivenessBytes = 32;

void write_liveness(int fd, int64_t count, bool ended) {
  char line[kLivenessBytes];
  std::memset(line, ' ', sizeof line);
  const int n = std::snprintf(line, sizeof line, "alive %lld%s", static_cast<long long>(count),
                              ended ? " ended" : "");
  if (n > 0 && size_t(n) < sizeof line) line[n] = ' ';
  line[sizeof line - 1] = '\n';
  [[maybe_unused]] const ssize_t written = ::pwrite(fd, line, sizeof line, kRecordBytes);
}

}  // namespace

std::string heartbeat_path(const std::string& dir, int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank-%06d", rank);
  return dir + "/" + name;
}

int phase_order(const std::string& phase) {
  static const char* const kOrder[] = {"start",     "data",       "compute", "comm",
                                       "optimizer", "checkpoint", "done"};
  for (int i = 0; i < 7; ++i)
    if (phase == kOrder[i]) return i;
  return -1;
}

Heartbeat::Heartbeat(std::string dir, int rank, std::string host)
    : dir_(std::move(dir)), host_(std::move(host)), rank_(rank) {
  std::error_code ec;
  std::filesystem::create_directory(dir_, ec);  // never its parents: a missing folder is an error
  // An earlier run's verdict in a reused folder is not this run's: the first verdict stands.
  if (rank_ == 0) std::filesystem::remove(dir_ + "/abort.json", ec);
  fd_ = ::open(heartbeat_path(dir_, rank_).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd_ < 0) throw UsageError("watchdog.dir: cannot write heartbeats in '" + dir_ + "'");
  beat(0, "start");
  // Host and pid, so a drill can kill this process from outside (drill.external_kill).
  // The real host name, even when tests pretend otherwise: it is where the process is.
  std::ofstream(pid_path()) << host_name() << ' ' << ::getpid() << '\n';
}

Heartbeat::~Heartbeat() {
  if (fd_ >= 0) ::close(fd_);
}

void Heartbeat::beat(int64_t step, const char* phase) {
  if (fd_ < 0) return;
  char record[kRecordBytes];
  std::memset(record, ' ', sizeof record);
  const int n = std::snprintf(record, sizeof record, "%lld %s %s %.6f",
                              static_cast<long long>(step), phase, host_.c_str(), unix_seconds());
  if (n > 0 && size_t(n) < sizeof record) record[n] = ' ';
  record[sizeof record - 1] = '\n';
  [[maybe_unused]] const ssize_t written = ::pwrite(fd_, record, sizeof record, 0);
  last_step_.store(step);
  last_phase_.store(phase);
  const double now = steady_seconds();
  last_beat_s_.store(now);
  if (deadline_) deadline_->mark_progress(now);
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
  if (fd_ >= 0) write_liveness(fd_, ++liveness_, false);
}

void Heartbeat::end_watch() {
  std::lock_guard<std::mutex> guard(liveness_mutex_);
  if (fd_ >= 0) write_liveness(fd_, liveness_, true);
}

void Heartbeat::finish() {
  {
    // The watchdog thread may still tick: the run ends before its watchdog does.
    std::lock_guard<std::mutex> guard(liveness_mutex_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  std::error_code ec;
  std::filesystem::remove(heartbeat_path(dir_, rank_), ec);
  std::filesystem::remove(pid_path(), ec);
}

std::string Heartbeat::pid_path() const {
  return dir_ + "/pid-rank-" + std::to_string(rank_);
}

void Heartbeat::remove_folder(bool made_by_this_run) const {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir_ + "/abort.json", ec)) return;
  if (made_by_this_run) {
    // Another rank may not have removed its own files yet; they are closed or about to be.
    for (const auto& entry : fs::directory_iterator(dir_, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("rank-", 0) == 0 || name.rfind("pid-rank-", 0) == 0 ||
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
  std::vector<HeartbeatRecord> records;
  records.reserve(size_t(world_size));
  for (int r = 0; r < world_size; ++r) records.push_back(read_one(dir, r));
  return records;
}

HeartbeatRecord Heartbeat::read_one(const std::string& dir, int rank) {
  HeartbeatRecord h;
  h.rank = rank;
  std::ifstream file(heartbeat_path(dir, rank));
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::istringstream record(text.substr(0, kRecordBytes));
  long long step = 0;
  if (record >> step >> h.phase >> h.host >> h.unix_time) {
    h.step = step;
    h.present = true;
  }
  if (text.size() < kRecordBytes + kLivenessBytes) return h;
  std::istringstream liveness(text.substr(kRecordBytes, kLivenessBytes));
  std::string word, ended;
  long long count = -1;
  if (liveness >> word >> count && word == "alive" && count >= 0) {
    h.liveness = count;
    h.watch_ended = liveness >> ended && ended == "ended";
  }
  return h;
}

}  // namespace tp
