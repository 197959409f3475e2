#include "app/stages/train_setup.h"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <unordered_set>
#include <utility>

#include "checkpoint/store.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/sysinfo.h"
#include "mpi/check.h"
#include "train/faults.h"
#include "train/node_region.h"

namespace tp {
namespace {

namespace fs = std::filesystem;

// The dataset the options ask for: the index's, with each explicitly given shape option.
DatasetSpec wanted_dataset(const TrainConfig& cfg, const DatasetSpec& found) {
  DatasetSpec wanted = found;
  for (const std::string& name : cfg.data.given) {
    if (name == "data.format") wanted.format = cfg.data.format;
    if (name == "data.files") wanted.files = cfg.data.files;
    if (name == "data.samples") wanted.samples = cfg.data.samples;
    if (name == "data.sample_bytes") wanted.sample_bytes = cfg.data.sample_bytes;
    if (name == "data.spread") wanted.spread = cfg.data.spread;
  }
  wanted.seed = cfg.seed;
  return wanted;
}

LoaderOptions loader_options(const TrainConfig& cfg, const DatasetSpec& dataset,
                             const World& world) {
  LoaderOptions lo;
  lo.readers = cfg.data.readers;
  lo.prefetch = cfg.data.prefetch;
  lo.verify = cfg.data.verify;
  lo.drop_cache = cfg.data.cache == "drop";
  lo.direct = cfg.data.direct;
  lo.test_read_delay_ms = cfg.test.read_delay_ms;
  lo.last_step = cfg.steps;
  if (cfg.data.rank_shift >= 0) {
    // Shard f was written by rank f mod N (prepare-data); read the shards of the rank K nodes
    // away, a node being the ranks that share this rank's host.
    const int per_node = world.ranks_on(world.host);
    const int source_rank =
        int((int64_t(world.rank) + int64_t(cfg.data.rank_shift) * per_node) % world.size);
    for (int f = source_rank; f < dataset.files; f += world.size) lo.shards.push_back(f);
    if (lo.shards.empty())
      throw UsageError("data.rank_shift needs data.files >= the world size (" +
                       std::to_string(dataset.files) + " files, " + std::to_string(world.size) +
                       " ranks)");
  }
  return lo;
}

// The text of the UsageError `check` throws, "" when it throws none.
template <class Check>
std::string usage_problem(Check check) {
  try {
    check();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

// A name no other job on these nodes uses: rank 0's pid and clock, and a random word.
std::string job_token() {
  std::random_device random;
  char token[64];
  std::snprintf(
      token, sizeof token, "%d-%llx-%08x", int(::getpid()),
      static_cast<unsigned long long>(std::chrono::steady_clock::now().time_since_epoch().count()),
      unsigned(random()));
  return token;
}

// This rank's place among its node's heartbeats (train/node_region.h): the node's first rank
// makes the node-local region, the others map it, and the first unlinks its name once every rank
// of the node has mapped it. A rank that cannot share it publishes a file of its own. Collective.
NodePlace node_place(const World& world) {
  const std::string token = broadcast_from_root(world, world.rank == 0 ? job_token() : "");
  const int first =
      int(std::find(world.host_of_rank.begin(), world.host_of_rank.end(), world.host) -
          world.host_of_rank.begin());
  const int slots = world.ranks_on(world.host);
  const std::string path =
      node_memory_folder() + "/trainproof-beats-" + token + "-" + std::to_string(first);
  NodePlace place;
  place.slot = world.index_on_host();
  place.node_first_rank = first;
  place.first_on_node = place.slot == 0;
  if (place.first_on_node) {
    try {
      place.region = NodeRegion::create(path, slots);
    } catch (const RuntimeError& e) {
      spdlog::warn("host {}: {}; each rank publishes its own heartbeat file", world.host, e.what());
    }
  }
  mpiCheck(MPI_Barrier(world.comm));
  if (!place.first_on_node) place.region = NodeRegion::attach(path, slots);
  // Every rank that shares the region counts itself in before any can finish: a rank that could
  // not map it (below) is not waited for when the node's file is removed.
  if (place.region) place.region->join();
  mpiCheck(MPI_Barrier(world.comm));
  if (place.first_on_node) ::unlink(path.c_str());
  if (!place.region) place = NodePlace{NodeRegion::private_region(1), 0, world.rank, true};
  return place;
}

}  // namespace

HeartbeatCleanup::~HeartbeatCleanup() {
  heartbeat_.finish();
  if (world_.rank == 0) heartbeat_.remove_folder(made_by_this_run_);
}

void HeartbeatCleanup::at_end() {
  heartbeat_.finish();
  mpiCheck(MPI_Barrier(world_.comm));
}

void check_batch_covers_world(const TrainConfig& cfg, const World& world) {
  if (cfg.model.global_batch < world.size)
    throw UsageError("model.batch=" + std::to_string(cfg.model.global_batch) +
                     " is smaller than the world size " + std::to_string(world.size) +
                     ": every rank needs at least one sample");
}

std::unique_ptr<Heartbeat> prepare_outputs(const TrainConfig& cfg, const std::string& report_path,
                                           const World& world) {
  // The report path first: a refused run leaves nothing behind, not even the heartbeat folder.
  std::string problem = usage_problem([&] {
    if (world.rank == 0) check_output_file("--report", report_path);
  });
  agree_or_throw<UsageError>(world, problem);
  std::unique_ptr<Heartbeat> heartbeat;
  NodePlace place = node_place(world);
  place.publish_every_s = cfg.watchdog_publish_s;
  const bool publishes_first = place.first_on_node;
  problem = usage_problem([&] {
    heartbeat = std::make_unique<Heartbeat>(
        cfg.watchdog_dir.empty()
            ? (fs::absolute(report_path).parent_path() / "trainproof-heartbeats").string()
            : cfg.watchdog_dir,
        world.rank, world.host, std::move(place));
  });
  agree_or_throw<UsageError>(world, problem);
  // Every rank of the node has beaten once: its file holds them all from here on.
  mpiCheck(MPI_Barrier(world.comm));
  if (publishes_first) heartbeat->publish_now();
  return heartbeat;
}

std::optional<DatasetSpec> reconcile_dataset(TrainConfig& cfg, const World& world) {
  if (cfg.data.dir.empty()) return std::nullopt;
  std::optional<DatasetSpec> dataset;
  std::string problem;
  try {
    dataset = read_index(cfg.data.dir);
    if (const std::string d = index_difference(*dataset, wanted_dataset(cfg, *dataset)); !d.empty())
      problem = "data.dir '" + cfg.data.dir + "' holds a different dataset (" + d +
                "; dataset vs this run); rerun prepare-data";
  } catch (const UsageError& e) {
    problem = e.what();
  }
  agree_or_throw<UsageError>(world, problem);
  cfg.data.format = dataset->format;
  cfg.data.files = dataset->files;
  cfg.data.samples = dataset->samples;
  cfg.data.sample_bytes = dataset->sample_bytes;
  cfg.data.spread = dataset->spread;
  if (cfg.epochs > 0)
    cfg.steps =
        int64_t(std::ceil(cfg.epochs * double(dataset->samples) / double(cfg.model.global_batch)));
  return dataset;
}

void keep_checkpoint_batch(TrainConfig& cfg, const World& world) {
  if (cfg.batch_per_rank <= 0 || cfg.resume == "none" || !cfg.checkpoint_allow_resize ||
      cfg.checkpoint_dir.empty())
    return;
  int written = world.rank == 0 ? CheckpointStore::newest_world_size(cfg.checkpoint_dir) : 0;
  mpiCheck(MPI_Bcast(&written, 1, MPI_INT, 0, world.comm));
  if (written <= 0 || written == world.size) return;
  cfg.model.global_batch = cfg.batch_per_rank * int64_t(written);
  cfg.batch_from_checkpoint_ranks = written;
  if (world.rank == 0)
    spdlog::info(
        "the newest checkpoint was written by {} ranks: the global batch stays {} "
        "(model.batch_per_rank={} x {}) on {} ranks",
        written, cfg.model.global_batch, cfg.batch_per_rank, written, world.size);
}

void resolve_faults(TrainConfig& cfg, const World& world) {
  for (FaultSpec& f : cfg.faults) {
    if (f.kind == FaultSpec::Kind::corrupt)
      throw UsageError("--fault '" + f.text +
                       "': corrupt damages a checkpoint between runs, so only trainproof drill "
                       "applies it");
    if (f.kind == FaultSpec::Kind::random) {
      const std::string seed = f.text;
      f = resolve_random(f, world.size, cfg.steps, cfg.checkpoint_every, world.hosts);
      if (world.rank == 0) spdlog::warn("fault {} drew {}", seed, f.text);
    }
  }
  // checkpoint.every is 0 without checkpoint.dir (the command line refuses anything else).
  validate_faults(cfg.faults, world.size, cfg.steps, cfg.checkpoint_every, world.hosts);
}

BatchSetup make_batch_source(const TrainConfig& cfg, const std::optional<DatasetSpec>& dataset,
                             BatchShare share, const World& world) {
  BatchSetup setup;
  if (!dataset) {
    setup.source = std::make_unique<SyntheticBatchSource>(cfg.model, share, cfg.seed);
    return setup;
  }
  std::string problem;
  try {
    auto loader = std::make_unique<DatasetBatchSource>(*dataset, cfg.model, share, cfg.seed,
                                                       loader_options(cfg, *dataset, world));
    setup.loader = loader.get();
    setup.source = std::move(loader);
  } catch (const UsageError& e) {
    problem = e.what();
  } catch (const RuntimeError& e) {
    problem = "data.dir on host " + world.host + ": " + e.what();
  }
  agree_or_throw<UsageError>(world, problem);
  return setup;
}

std::vector<std::string> heartbeat_visibility_warnings(
    const std::string& dir, const std::vector<std::string>& host_of_rank,
    const std::vector<std::vector<int>>& unreadable_by_rank) {
  std::vector<std::string> warnings, reported;
  for (size_t r = 0; r < unreadable_by_rank.size(); ++r) {
    const std::vector<int>& missing = unreadable_by_rank[r];
    const std::string& reader = host_of_rank.at(r);
    if (missing.empty() || std::find(reported.begin(), reported.end(), reader) != reported.end())
      continue;
    reported.push_back(reader);
    std::vector<std::string> owners;
    for (int m : missing)
      if (std::find(owners.begin(), owners.end(), host_of_rank.at(size_t(m))) == owners.end())
        owners.push_back(host_of_rank.at(size_t(m)));
    std::string hosts;
    for (const std::string& h : owners) hosts += (hosts.empty() ? "" : ", ") + h;
    warnings.push_back("heartbeats in '" + dir + "': host " + reader +
                       " cannot read those of ranks " + format_cpulist(missing) + " (host " +
                       hosts +
                       "): the folder is not shared by every node, so a stalled job's "
                       "abort.json would name live ranks as missing; set watchdog.dir to a "
                       "folder every node mounts");
  }
  return warnings;
}

std::vector<std::pair<int, int>> heartbeat_ring(const std::vector<std::string>& host_of_rank) {
  std::vector<int> first_rank;  // of each host, in order of first rank
  std::unordered_set<std::string> seen;
  for (size_t r = 0; r < host_of_rank.size(); ++r)
    if (seen.insert(host_of_rank[r]).second) first_rank.push_back(int(r));
  std::vector<std::pair<int, int>> ring;
  if (first_rank.size() < 2) return ring;
  for (size_t k = 0; k < first_rank.size(); ++k)
    ring.emplace_back(first_rank[k], first_rank[(k + 1) % first_rank.size()]);
  return ring;
}

std::vector<std::string> check_heartbeats_visible(const World& world, const Heartbeat& heartbeat,
                                                  double retry_s) {
  mpiCheck(MPI_Barrier(world.comm));  // every rank has written its first beat
  std::vector<int> missing;
  for (const auto& [reader, target] : heartbeat_ring(world.host_of_rank))
    if (reader == world.rank && !Heartbeat::readable_within(heartbeat.dir(), target, retry_s))
      missing.push_back(target);
  const std::vector<std::string> all = gather_strings_at_root(world, format_cpulist(missing));
  if (world.rank != 0) return {};
  std::vector<std::vector<int>> unreadable;
  for (const std::string& entry : all) unreadable.push_back(parse_cpulist(entry));
  return heartbeat_visibility_warnings(heartbeat.dir(), world.host_of_rank, unreadable);
}

}  // namespace tp
