#pragma once
// The checks and resolutions `train` makes before it allocates anything: its output paths and
// heartbeat folder, the dataset on storage (its index wins over the options), the faults
// (random ones drawn), and the batch source the step loop reads. Each agrees across ranks, so
// every rank stops alike with one message.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/batch_source.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "mpi/world.h"
#include "train/heartbeat.h"
#include "train/train_config.h"

namespace tp {

// Checks that the report's folder exists and is writable (rank 0), and creates this rank's
// heartbeat file: in watchdog.dir, or trainproof-heartbeats/ beside the report.
std::unique_ptr<Heartbeat> prepare_outputs(const TrainConfig& config,
                                           const std::string& report_path, const World& world);

// Leaves no heartbeats behind when the job ends cleanly: at its end, or at an error every rank
// agreed on. A job that aborts keeps them as evidence (the watchdog's abort.json, a drill's).
class HeartbeatCleanup {
 public:
  HeartbeatCleanup(Heartbeat& heartbeat, const World& world, bool made_by_this_run)
      : heartbeat_(heartbeat), world_(world), made_by_this_run_(made_by_this_run) {}
  ~HeartbeatCleanup();
  HeartbeatCleanup(const HeartbeatCleanup&) = delete;
  HeartbeatCleanup& operator=(const HeartbeatCleanup&) = delete;
  // At the end of a run every rank removes its own files before rank 0 removes the folder.
  void at_end();

 private:
  Heartbeat& heartbeat_;
  const World& world_;
  bool made_by_this_run_;
};

// After set-up, the first rank of each node reads the heartbeat of the next node's first rank, in
// a ring over the nodes (after a barrier, retrying for up to `retry_s`): one read per node across
// the job, and nodes that see different folders meet at some link of the ring. A heartbeat
// folder some node does not share would make a stalled job's abort.json name live ranks as
// missing; each host that cannot read its neighbour's heartbeat gets a warning. Collective; the
// warnings are complete on rank 0.
std::vector<std::string> check_heartbeats_visible(const World& world, const Heartbeat& heartbeat,
                                                  double retry_s = 5.0);
// Pure: the ring's (reader, target) ranks, one pair per node; none on one node.
std::vector<std::pair<int, int>> heartbeat_ring(const std::vector<std::string>& host_of_rank);
// The warnings from each rank's host and the ranks it could not read ([rank]).
std::vector<std::string> heartbeat_visibility_warnings(
    const std::string& dir, const std::vector<std::string>& host_of_rank,
    const std::vector<std::vector<int>>& unreadable_by_rank);

// With data.dir: reads the dataset's index, refuses it when an explicitly given shape option
// disagrees, and takes the dataset's shape (and, with train.epochs, the step count) into `config`.
std::optional<DatasetSpec> reconcile_dataset(TrainConfig& config, const World& world);

// Collective. With model.batch_per_rank and a checkpoint written by another number of ranks that
// this run may restore (checkpoint.allow_resize), the global batch is the checkpoint's:
// batch_per_rank x the ranks that wrote it, so the same samples meet the same optimizer steps
// (docs/checkpoint.md, "Restore at another world size").
void keep_checkpoint_batch(TrainConfig& config, const World& world);

// Every rank gets at least one sample of the global batch (a UsageError otherwise).
void check_batch_covers_world(const TrainConfig& config, const World& world);

// Draws random faults (the same on every rank) and validates every fault against the run.
void resolve_faults(TrainConfig& config, const World& world);

// The step loop's source of samples: the loader over `dataset`, or the synthetic source.
struct BatchSetup {
  std::unique_ptr<BatchSource> source;
  DatasetBatchSource* loader = nullptr;  // the source, when it reads a dataset
};
BatchSetup make_batch_source(const TrainConfig& config, const std::optional<DatasetSpec>& dataset,
                             BatchShare share, const World& world);

}  // namespace tp
