#include "app/accept/accept_preflight.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "app/accept/accept_inventory.h"
#include "app/report/gate.h"
#include "app/stages/backend_selection.h"
#include "app/stages/topology_facts.h"
#include "data/dataset.h"
#include "mpi/gather.h"
#include "mpi/world.h"

namespace tp {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string errno_text(const std::string& what, const std::string& path) {
  return what + " '" + path + "': " + std::strerror(errno);
}

}  // namespace

ProbeFolder make_probe_folder(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return {"", "cannot create '" + dir + "': " + ec.message()};
  std::string name = dir + "/.trainproof-accept-probe-XXXXXX";
  if (::mkdtemp(name.data()) == nullptr) return {"", errno_text("cannot create a folder in", dir)};
  return {name, ""};
}

FolderProbe probe_checkpoint_folder(const std::string& probe_folder, int rank) {
  const auto start = std::chrono::steady_clock::now();
  const std::string path = probe_folder + "/rank-" + std::to_string(rank);
  const std::string text = "trainproof probe from rank " + std::to_string(rank) + "\n";
  // A new file or nothing: a name that is already there, a link included, is never opened.
  const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_NOFOLLOW | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 && errno == ENOENT)
    return {"the probe folder '" + probe_folder +
                "' that rank 0 made is not there: checkpoint.dir is not the same folder on every "
                "host",
            0};
  if (fd < 0) return {errno_text("cannot create", path), 0};
  std::string problem;
  char back[128] = {};
  if (::write(fd, text.data(), text.size()) != ssize_t(text.size()))
    problem = errno_text("cannot write", path);
  else if (::fsync(fd) != 0)
    problem = errno_text("cannot fsync", path);
  else if (::pread(fd, back, sizeof back, 0) != ssize_t(text.size()) ||
           std::memcmp(back, text.data(), text.size()) != 0)
    problem = "'" + path + "' did not read back what was written";
  ::close(fd);
  if (::unlink(path.c_str()) != 0 && problem.empty()) problem = errno_text("cannot delete", path);
  return {problem, seconds_since(start)};
}

void remove_probe_folder(const std::string& probe_folder) {
  if (probe_folder.empty()) return;
  std::error_code ec;
  fs::remove_all(probe_folder, ec);  // the folder is this run's own (mkdtemp, mode 0700)
}

FolderProbe probe_data_folder(const std::string& dir) {
  const auto start = std::chrono::steady_clock::now();
  try {
    read_index(dir);  // the loader's own checks: a regular file (never blocks), every field
  } catch (const std::exception& e) {
    return {e.what(), 0};
  }
  return {"", seconds_since(start)};
}

json folder_probe_check(const std::vector<std::string>& roles,
                        const std::vector<std::vector<FolderProbe>>& by_rank,
                        const std::vector<std::string>& host_of_rank) {
  int failed = 0;
  std::string first;
  for (size_t r = 0; r < by_rank.size(); ++r)
    for (size_t f = 0; f < by_rank[r].size(); ++f)
      if (!by_rank[r][f].problem.empty()) {
        if (first.empty())
          first = "rank " + std::to_string(r) + " (" + host_of_rank[r] + "), " + roles[f] + ": " +
                  by_rank[r][f].problem;
        ++failed;
      }
  if (roles.empty())
    return gate_check("folder_probe", nullptr, 0, "n/a", "no checkpoint.dir or data.dir to probe");
  return gate_check("folder_probe", failed, 0, failed == 0 ? "pass" : "fail",
                    failed == 0 ? "every rank wrote, synced, read back and deleted a file in "
                                  "each checkpoint folder and read each dataset's index"
                                : std::to_string(failed) + " probe(s) failed; first: " + first);
}

PreflightStage preflight_stage(const TrainConfig& config, const World& world,
                               const InventorySpec& inventory, const std::string& host_file,
                               const OpenFileNeed& open_files) {
  NodeRead read = read_this_node(config.test, world, false);
  // Before the backends: MPI and NCCL open their connections with the limit raised.
  const json files = open_files_stage(open_files, world);
  const std::vector<NodeInventory> inventories =
      gather_records_at_root(world, node_inventory(inventory, read));
  HealthStage gpus = gpu_health_stage(read, world);
  const Backends backends = select_backends(config, world, nullptr);
  const TopologyPreflight topology = run_topology_preflight(config, world, backends);
  std::vector<std::string> roles;
  std::vector<FolderProbe> mine;
  ProbeFolder probe_folder;
  if (!config.checkpoint_dir.empty()) {
    roles.push_back("checkpoint.dir " + config.checkpoint_dir);
    if (world.rank == 0) probe_folder = make_probe_folder(config.checkpoint_dir);
    probe_folder.problem = broadcast_from_root(world, probe_folder.problem);
    probe_folder.path = broadcast_from_root(world, probe_folder.path);
    mine.push_back(probe_folder.problem.empty()
                       ? probe_checkpoint_folder(probe_folder.path, world.rank)
                       : FolderProbe{probe_folder.problem, 0});
  }
  if (!config.data.dir.empty()) {
    roles.push_back("data.dir " + config.data.dir);
    mine.push_back(probe_data_folder(config.data.dir));
  }
  json probes = json::array();
  for (const FolderProbe& p : mine) probes.push_back({{"problem", p.problem}, {"s", p.seconds}});
  const std::vector<json> all = gather_records_at_root(world, probes);
  PreflightStage stage;
  stage.read = std::move(read);
  if (world.rank != 0) return stage;
  remove_probe_folder(probe_folder.path);  // every rank's probe has ended: they were gathered
  std::vector<std::vector<FolderProbe>> by_rank;
  json folders = json::array();
  for (const json& rank : all) {
    by_rank.emplace_back();
    for (const json& p : rank) by_rank.back().push_back({p["problem"], p["s"]});
  }
  for (size_t f = 0; f < roles.size(); ++f) {
    double slowest = 0;
    for (const auto& rank : by_rank) slowest = std::max(slowest, rank[f].seconds);
    folders.push_back({{"folder", roles[f]}, {"slowest_probe_s", slowest}});
  }
  InventoryStage judged = judge_node_inventories(inventories, !inventory.empty(), host_file);
  stage.inventory_findings = std::move(judged.findings);
  for (auto& found : gpus.findings) stage.inventory_findings.push_back(std::move(found));
  stage.checks = json::array({judged.check, gpus.check, files,
                              topology_check(topology.judgement.reasons, topology.measured),
                              folder_probe_check(roles, by_rank, world.host_of_rank)});
  stage.section = {{"topology_reasons", topology.judgement.reasons}, {"folders", folders}};
  stage.nodes = topology.nodes;
  return stage;
}

}  // namespace tp
