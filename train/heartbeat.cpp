#include "train/heartbeat.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/clock.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/sysinfo.h"

namespace tp {
namespace {

constexpr size_t kRecordBytes = 160;

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
  last_beat_s_.store(steady_seconds());
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

void Heartbeat::finish() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
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

std::vector<HeartbeatRecord> Heartbeat::read_all(const std::string& dir, int world_size) {
  std::vector<HeartbeatRecord> records(world_size);
  for (int r = 0; r < world_size; ++r) {
    records[r].rank = r;
    std::ifstream in(heartbeat_path(dir, r));
    HeartbeatRecord& h = records[r];
    long long step = 0;
    if (in >> step >> h.phase >> h.host >> h.unix_time) {
      h.step = step;
      h.present = true;
    }
  }
  return records;
}

std::vector<HeartbeatRecord> Heartbeat::behind(const std::vector<HeartbeatRecord>& all,
                                               const HeartbeatRecord& me) {
  std::vector<HeartbeatRecord> missing;
  for (const HeartbeatRecord& h : all) {
    const bool is_behind = !h.present || h.step < me.step ||
                           (h.step == me.step && phase_order(h.phase) < phase_order(me.phase));
    if (is_behind) missing.push_back(h);
  }
  return missing;
}

std::string write_abort_record(const std::string& dir, const std::string& what,
                               const HeartbeatRecord& me,
                               const std::vector<HeartbeatRecord>& missing) {
  nlohmann::json record;
  record["reason"] = what;
  record["detected_by"] = {
      {"rank", me.rank}, {"host", me.host}, {"step", me.step}, {"phase", me.phase}};
  record["detected_at_unix"] = unix_seconds();
  record["missing"] = nlohmann::json::array();
  std::ostringstream summary;
  for (const HeartbeatRecord& h : missing) {
    record["missing"].push_back({{"rank", h.rank},
                                 {"host", h.present ? nlohmann::json(h.host) : nlohmann::json()},
                                 {"last_step", h.step},
                                 {"last_phase", h.present ? h.phase : "none"},
                                 {"last_seen_unix", h.unix_time}});
    summary << (summary.tellp() ? ", " : "") << "rank " << h.rank
            << (h.present ? " on " + h.host + " (last in step " + std::to_string(h.step) + " " +
                                h.phase + ")"
                          : " (no heartbeat)");
  }
  // Several ranks' watchdogs may fire together: each writes its own file and renames it, so the
  // record read back is always one whole record.
  const std::string path = dir + "/abort.json";
  try {
    write_file_atomically(path, record.dump(2) + "\n", ".rank-" + std::to_string(me.rank));
  } catch (const std::exception&) {
    // The abort goes ahead; the message below still names the missing ranks.
  }
  return missing.empty() ? "every rank's heartbeat reached this point (abort.json: " + path + ")"
                         : "did not arrive: " + summary.str() + " (abort.json: " + path + ")";
}

}  // namespace tp
