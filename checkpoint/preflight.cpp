// The checkpoint folder's preflight (docs/checkpoint.md, "Preflight"): the folder's lock, the
// leftovers of earlier runs, the probe every rank writes, other scenarios' checkpoints, and the
// free space the checkpoints a run keeps need.
#include <mpi.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "checkpoint/rank_file.h"
#include "checkpoint/storage_space.h"
#include "checkpoint/store.h"
#include "common/errors.h"
#include "common/json_depth.h"
#include "mpi/check.h"

namespace tp {

namespace fs = std::filesystem;

namespace {

constexpr const char* kProbePrefix = ".preflight-rank-";
// HDF5's metadata in one file (about 3 KiB), rounded up with a filesystem block to spare.
constexpr uint64_t kFileOverheadBytes = 16 << 10;

bool ends_with(const std::string& text, const std::string& tail) {
  return text.size() > tail.size() &&
         text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

bool is_step_folder_name(const std::string& name) {
  long long step = 0;
  char tail = 0;
  return std::sscanf(name.c_str(), "step-%lld%c", &step, &tail) == 1 &&
         name == CheckpointStore::folder_name(step);
}

// The names the store makes and may leave behind, and only those: step-NNNNNNNN.partial (a save
// cut short), step-NNNNNNNN.deleting (a deletion cut short) and .preflight-rank-R (a probe). A
// .corrupt folder is kept for inspection, and the lock file is never deleted.
bool is_leftover(const std::string& name) {
  for (const std::string suffix : {".partial", ".deleting"})
    if (ends_with(name, suffix) && is_step_folder_name(name.substr(0, name.size() - suffix.size())))
      return true;
  const std::string prefix = kProbePrefix;
  return name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
         std::all_of(name.begin() + long(prefix.size()), name.end(),
                     [](unsigned char c) { return std::isdigit(c) != 0; });
}

std::string size_text(uint64_t bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "%llu bytes (%.1f MiB)", static_cast<unsigned long long>(bytes),
                double(bytes) / double(1 << 20));
  return text;
}

// The scenario hash a committed checkpoint's manifest names, or "" when it names none.
std::string manifest_scenario_hash(const std::string& folder) {
  std::ifstream in(folder + "/MANIFEST.json");
  std::stringstream text;
  text << in.rdbuf();
  if (!json_depth_problem(text.str()).empty()) return "";  // damage: the restore's to find
  try {
    return nlohmann::json::parse(text.str()).value("scenario_hash", "");
  } catch (const nlohmann::json::exception&) {
    return "";  // damage is the restore's to find
  }
}

std::string joined(const std::set<std::string>& items) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : ", ") + item;
  return text;
}

}  // namespace

uint64_t CheckpointStore::expected_bytes(uint64_t elements, bool with_moment2) const {
  const uint64_t state = elements * sizeof(float) * (with_moment2 ? 3 : 2);
  const uint64_t files =
      options_.layout == CheckpointLayout::shared_file ? 1 : uint64_t(world_.size);
  const uint64_t data = sliced() ? state : state * uint64_t(world_.size);
  const uint64_t manifest = 4096 + 256 * uint64_t(world_.size);
  if (options_.layout == CheckpointLayout::shared_file)
    return data + files * kFileOverheadBytes + manifest;
  // A rank file's large datasets start aligned: its size follows from where HDF5 places them.
  const uint64_t file_elements =
      sliced() ? (elements + uint64_t(world_.size) - 1) / uint64_t(world_.size) : elements;
  const uint64_t tensor = file_elements * sizeof(float);
  const uint64_t file = rank_file_size_estimate({tensor, tensor, with_moment2 ? tensor : 0});
  return files * file + manifest;
}

std::string CheckpointStore::take_lock(CheckpointFolderFacts& facts) {
  const std::string& dir = options_.dir;
  const std::string path = dir + "/" + kFolderLockFile;
  try {
    if (options_.held_lock && options_.held_lock->held()) {
      lock_ = options_.held_lock->share();
      return "";
    }
    lock_ = FolderLock::take(path, options_.lock_wait_s, world_.host, [&](const std::string& who) {
      spdlog::warn(
          "checkpoint.dir '{}' is in use by another job ({}); waiting up to {} s for it "
          "(checkpoint.lock_wait_s)",
          dir, who, options_.lock_wait_s);
    });
  } catch (const RuntimeError& e) {
    return "checkpoint.dir '" + dir + "' is not usable on host " + world_.host + ": " + e.what();
  }
  if (lock_.state() == FolderLock::State::busy) {
    std::ostringstream waited;
    waited << options_.lock_wait_s;
    return "checkpoint.dir '" + dir + "' is in use by another job: " + lock_.holder() +
           " holds its lock (" + path + ") and kept it for checkpoint.lock_wait_s=" + waited.str() +
           " s; one job at a time writes a checkpoint folder";
  }
  if (lock_.state() == FolderLock::State::unsupported) {
    const std::string warning =
        "checkpoint.dir '" + dir + "' is on a filesystem that refuses flock (" + lock_.detail() +
        "): nothing stops a second job from writing the same folder, and what earlier runs left "
        "behind is not removed";
    spdlog::warn("{}", warning);
    facts.warnings.push_back(warning);
  }
  return "";
}

void CheckpointStore::remove_leftovers() const {
  std::vector<fs::path> leftovers;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options_.dir, ec))
    if (is_leftover(entry.path().filename().string())) leftovers.push_back(entry.path());
  std::string removed;
  for (const fs::path& path : leftovers) {
    fs::remove_all(path, ec);
    if (!ec) removed += (removed.empty() ? "" : ", ") + path.filename().string();
  }
  if (!removed.empty())
    spdlog::info("checkpoint.dir '{}': removed what earlier runs left behind: {}", options_.dir,
                 removed);
}

// Every rank writes, fsyncs and deletes a probe file; a rank that cannot see rank 0's probe sees
// another folder, where neither its checkpoints would be committed nor a restore would find them.
void CheckpointStore::probe_from_every_rank() const {
  const std::string& dir = options_.dir;
  const std::string probe = dir + "/" + kProbePrefix + std::to_string(world_.rank);
  // A rank that still lacks the folder rank 0 made is on a host that does not share it: it
  // creates its own, and is found out below.
  std::error_code ec;
  if (world_.rank != 0) fs::create_directories(dir, ec);
  std::string problem;
  try {
    if (!fs::is_directory(dir)) throw RuntimeError("it is not a folder that exists");
    const char byte = 1;
    write_durably(probe, &byte, 1, clock_);
  } catch (const RuntimeError& e) {
    fs::remove(probe, ec);  // a probe that could not be written is not left behind
    problem = "checkpoint.dir '" + dir + "' is not usable on host " + world_.host + ": " + e.what();
  }
  agree_or_throw<UsageError>(world_, problem);

  const std::string seen = options_.test_unshared_rank == world_.rank ? dir + "/.unshared" : dir;
  const bool sees_rank0 = fs::exists(seen + "/" + kProbePrefix + "0", ec);
  const std::string blind =
      sees_rank0 ? std::string()
                 : "checkpoint.dir '" + dir + "' on host " + world_.host +
                       " is not the folder rank 0 sees (rank 0's probe file is not there): "
                       "checkpoints need storage that every node shares";
  // The agreement is also a barrier: every rank has looked for rank 0's probe before any probe
  // is removed.
  const std::string first = first_problem_named(world_, blind);
  fs::remove(probe, ec);
  if (!first.empty()) throw UsageError(first);
}

std::string CheckpointStore::check_scenarios(const PreflightPlan& plan,
                                             CheckpointFolderFacts& facts) const {
  std::vector<std::string> foreign;
  std::set<std::string> hashes;
  for (const auto& [step, folder] : committed()) {
    const std::string hash = manifest_scenario_hash(folder);
    if (hash.empty() || hash == scenario_hash_) continue;
    foreign.push_back(folder);
    hashes.insert(hash);
  }
  if (foreign.empty()) return "";
  const std::string& dir = options_.dir;
  if (options_.overwrite) {
    for (const std::string& folder : foreign) {
      std::error_code ec;
      fs::rename(folder, folder + ".deleting", ec);
      if (!ec) fs::remove_all(folder + ".deleting", ec);
    }
    const std::string note = "checkpoint.overwrite=true: deleted " +
                             std::to_string(foreign.size()) + " checkpoint(s) of scenario hash " +
                             joined(hashes) + " from checkpoint.dir '" + dir +
                             "' (this run's scenario hash is " + scenario_hash_ + ")";
    spdlog::warn("{}", note);
    facts.warnings.push_back(note);
    return "";
  }
  if (!plan.fresh_start) return "";  // a restore meets them, and refuses them naming both hashes
  return "checkpoint.dir '" + dir + "' holds checkpoints of another scenario (scenario hash " +
         joined(hashes) + ", newest " + foreign.front() + "); this run's scenario hash is " +
         scenario_hash_ +
         ". --resume none would mix the two in one folder: choose another checkpoint.dir, or set "
         "--checkpoint.overwrite=true to delete them";
}

std::string CheckpointStore::check_capacity(const PreflightPlan& plan) const {
  if (plan.checkpoint_bytes == 0) return "";
  const std::string& dir = options_.dir;
  // At the peak, keep checkpoints are committed and one more is being written. Those the folder
  // holds already (up to keep of them) count toward it.
  const uint64_t peak = plan.checkpoint_bytes * uint64_t(options_.keep + 1);
  uint64_t held = 0;
  int counted = 0;
  for (const auto& [step, folder] : committed()) {
    if (counted++ == options_.keep) break;
    held += bytes_under(folder);
  }
  const uint64_t needed = std::max(peak > held ? peak - held : 0, plan.checkpoint_bytes);
  uint64_t free = 0;
  try {
    free = free_bytes(dir);
  } catch (const RuntimeError& e) {
    return "checkpoint.dir '" + dir + "' is not usable on host " + world_.host + ": " + e.what();
  }
  if (free >= needed) return "";
  return "checkpoint.dir '" + dir + "' on host " + world_.host + " has " + size_text(free) +
         " free; this run needs " + size_text(needed) +
         " for its checkpoints: checkpoint.keep=" + std::to_string(options_.keep) +
         " kept plus the one being written, about " + std::to_string(plan.checkpoint_bytes) +
         " bytes each" +
         (held > 0 ? ", less the " + std::to_string(held) + " bytes its newest checkpoints hold"
                   : std::string()) +
         ". Free space, lower checkpoint.keep, or choose another checkpoint.dir";
}

CheckpointFolderFacts CheckpointStore::preflight(const PreflightPlan& plan) {
  CheckpointFolderFacts facts;
  facts.path = options_.dir;
  // Rank 0 creates the folder and takes its lock before any rank touches what is in it; only
  // the lock's holder removes leftovers, which are then no other job's.
  // The leftovers go before the agreement releases the other ranks: removed after it, rank 0
  // would race them and delete the probe files they were writing (and call those an earlier
  // run's).
  std::string problem;
  if (world_.rank == 0) {
    std::error_code ec;
    fs::create_directories(options_.dir, ec);
    problem = take_lock(facts);
    if (problem.empty() && lock_.held()) remove_leftovers();
  }
  agree_or_throw<UsageError>(world_, problem);
  probe_from_every_rank();
  agree_or_throw<UsageError>(world_, world_.rank == 0 ? check_scenarios(plan, facts) : "");
  agree_or_throw<UsageError>(world_, world_.rank == 0 ? check_capacity(plan) : "");
  facts.filesystem = filesystem_type(options_.dir);
  return facts;
}

}  // namespace tp
