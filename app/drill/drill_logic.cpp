#include "app/drill/drill_logic.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "checkpoint/store.h"
#include "common/errors.h"
#include "common/json_depth.h"
#include "train/heartbeat.h"

namespace tp {

namespace fs = std::filesystem;

std::optional<int64_t> last_completed_step(const std::vector<HeartbeatRecord>& heartbeats) {
  std::optional<int64_t> last;
  for (const HeartbeatRecord& heartbeat : heartbeats) {
    if (!heartbeat.present || heartbeat.phase == "start") continue;
    const int64_t completed = heartbeat.phase == "checkpoint" || heartbeat.phase == "done"
                                  ? heartbeat.step
                                  : heartbeat.step - 1;
    last = last ? std::min(*last, completed) : completed;
  }
  return last;
}

int heartbeat_ranks(const std::string& dir) {
  return Heartbeat::ranks_in(dir);
}

std::string corrupt_checkpoint(const std::string& folder, const FaultSpec& fault) {
  const std::string name = rank_checkpoint_file(fault.rank);
  const std::string shared = folder + "/" + kSharedCheckpointFile;
  std::string path = folder + "/" + name;
  if (!fs::exists(path) && fs::exists(shared)) path = shared;
  if (!fs::exists(path))
    throw RuntimeError("--fault '" + fault.text + "': " + folder + " has no " + name);
  const uintmax_t size = fs::file_size(path);
  if (fault.mode == "delete") {
    fs::remove(path);
  } else if (fault.mode == "truncate") {
    fs::resize_file(path, size / 2);
  } else {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(std::streamoff(size / 2));
    char byte = 0;
    file.read(&byte, 1);
    byte = char(byte ^ 0x01);
    file.seekp(std::streamoff(size / 2));
    file.write(&byte, 1);
    if (!file) throw RuntimeError("cannot flip a byte of " + path);
  }
  return path;
}

std::vector<std::string> forwarded_options(const po::variables_map& options) {
  // The drill sets these per run; the rest is forwarded as given (scenario values included, so a
  // child needs no scenario file it might not find).
  // --junit, --metrics, --strict and --trace are the drill's own outputs, not each run's (a run
  // writes its trace beside its own report).
  static const std::set<std::string> kOwn = {
      "launcher", "fault",   "resume", "report",  "checkpoint.dir", "watchdog.dir", "scenario",
      "help",     "version", "junit",  "metrics", "strict",         "trace"};
  std::vector<std::string> words;
  for (const auto& [name, value] : options) {
    if (value.defaulted() || kOwn.count(name) || name.rfind("drill.", 0) == 0 || name == "operand")
      continue;
    const boost::any& any = value.value();
    if (const auto* text = boost::any_cast<std::string>(&any)) {
      words.push_back("--" + name + "=" + *text);
    } else if (const auto* number = boost::any_cast<int64_t>(&any)) {
      words.push_back("--" + name + "=" + std::to_string(*number));
    } else if (const auto* integer = boost::any_cast<int>(&any)) {
      words.push_back("--" + name + "=" + std::to_string(*integer));
    } else if (const auto* unsigned_number = boost::any_cast<uint64_t>(&any)) {
      words.push_back("--" + name + "=" + std::to_string(*unsigned_number));
    } else if (const auto* real = boost::any_cast<double>(&any)) {
      char text[64];  // the shortest text that reads back as the same double
      const auto end = std::to_chars(text, text + sizeof text, *real).ptr;
      words.push_back("--" + name + "=" + std::string(text, end));
    } else if (const auto* flag = boost::any_cast<bool>(&any)) {
      words.push_back("--" + name + "=" + (*flag ? "true" : "false"));
    } else if (const auto* list = boost::any_cast<std::vector<std::string>>(&any)) {
      for (const std::string& item : *list) words.push_back("--" + name + "=" + item);
    } else {
      throw UsageError("drill: cannot forward option " + name + " (unexpected type)");
    }
  }
  return words;
}

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nullptr;
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (!json_depth_problem(text).empty()) return nullptr;
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    return nullptr;
  }
}

std::string last_lines(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) all.push_back(line);
  std::string tail;
  for (size_t index = all.size() > lines ? all.size() - lines : 0; index < all.size(); ++index)
    tail += all[index] + "\n";
  return tail;
}

std::string telling_lines(const std::string& path, size_t most) {
  static const char* const causes[] = {"trainproof: rank ", "trainproof: runtime error",
                                       "trainproof: error", "srun: error: ",
                                       "Signal: ",          "mpirun noticed",
                                       "MPI_ABORT"};
  std::ifstream in(path);
  std::string told, last;
  size_t found = 0;
  for (std::string line; std::getline(in, line);) {
    last = line;
    if (found == most) continue;
    for (const char* cause : causes)
      if (line.find(cause) != std::string::npos) {
        told += line + "\n";
        ++found;
        break;
      }
  }
  return found ? told : last.empty() ? "" : last + "\n";
}

std::string shell_quote(const std::string& word) {
  std::string quoted = "'";
  for (char letter : word) quoted += letter == '\'' ? std::string("'\\''") : std::string(1, letter);
  return quoted + "'";
}

}  // namespace tp
