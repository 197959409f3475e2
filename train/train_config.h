#pragma once
// Everything the step loop needs, resolved from options (app/cli/cli.cpp) and validated.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/folder_lock.h"
#include "kernels/compute_backend.h"
#include "kernels/model_spec.h"
#include "train/faults.h"

namespace tp {

struct TestHooks {
  int perturb_state_rank = -1;       // flips a parameter bit on this rank before the digest
  int corrupt_collective_rank = -1;  // falsifies this rank's result in the collective self-check
  int clock_offset_rank = -1;        // adds clock_offset_s to this rank's raw clock
  double clock_offset_s = 0.0;
  bool skip_clock_alignment = false;
  int split_hosts = 0;  // pretend the ranks are spread over this many hosts
  // test.hold_collective: this rank never enters this collective of this communicator, and
  // waits there until the job is ended (the hang report's test). -1: none.
  int hold_rank = -1;
  int64_t hold_seq = 0;
  std::string hold_comm = "world";
  int mpi_error_rank = -1;   // makes this rank issue an invalid MPI call, to exercise exit code 3
  std::string skip_restore;  // "moment1": restore leaves it zero (negative control of resume)
  double read_delay_ms = 0;  // each dataset sample read sleeps this long
  int unshared_checkpoint_rank = -1;  // this rank's preflight sees a folder of its own
  int64_t host_memory_bytes = 0;      // > 0: the host's available memory, for the memory check
  std::string sysfs_root;             // the topology preflight of sysfs_root_rank's node reads it
  int sysfs_root_rank = -1;
  std::string sysfs_root_after;  // accept's read after its last stage, there (default sysfs_root)
};

// The storage-backed dataset (data/), when data.dir is set; the synthetic in-memory source else.
struct DataConfig {
  std::string dir;
  std::string format = "raw";
  int files = 4;
  int64_t samples = 1024;
  int64_t sample_bytes = 65536;
  double spread = 0.0;
  std::vector<std::string> given;  // the shape options set explicitly (checked against the index)
  int readers = 2;
  int prefetch = 2;
  bool verify = false;
  std::string cache = "keep";  // or drop
  bool direct = false;
  int rank_shift = -1;  // >= 0: each rank reads the shards written by the rank K nodes away
  bool force = false;   // prepare-data: replace a different dataset
};

struct TrainConfig {
  ModelSpec model;  // model.global_batch is 0 until resolve_global_batch when batch_per_rank > 0
  int64_t batch_per_rank = 0;  // > 0: model.batch_per_rank sets the batch, not model.batch
  // > 0: a restore at another world size kept the checkpoint's global batch, batch_per_rank x the
  // ranks that wrote it (docs/checkpoint.md, "Restore at another world size").
  int batch_from_checkpoint_ranks = 0;
  bool preflight_topology = true;  // read and compare every node's topology at start
  int64_t steps = 0;
  int64_t warmup_steps = 0;
  uint64_t seed = 0;
  OptimizerConfig optimizer;
  std::string dtype = "fp32";
  std::string compute_backend = "auto";
  std::string comm_backend = "auto";
  double bucket_mb = 25.0;
  int ranks_per_root = 128;  // NCCL set-up: one ncclUniqueId root per this many ranks
  bool overlap = true;
  double watchdog_timeout_s = 0.0;       // 0: auto (train/watchdog.h)
  std::string watchdog_dir;              // heartbeats and abort.json; empty: beside the report
  double watchdog_abort_grace_s = 30.0;  // how long an ncclCommAbort may take before exit 3
  double watchdog_publish_s = 1.0;       // a node's heartbeat file is rewritten at most this often
  int64_t log_every = 0;                 // 0: about ten progress lines per run
  std::vector<FaultSpec> faults;
  std::string checkpoint_dir;  // empty: no checkpoints
  int64_t checkpoint_every = 0;
  int checkpoint_keep = 2;
  bool checkpoint_cold_read = false;
  std::string checkpoint_layout = "file-per-rank";  // or shared-file
  bool checkpoint_shard_optimizer = false;
  bool checkpoint_async = false;
  bool checkpoint_overwrite = false;     // delete another scenario's checkpoints in the folder
  double checkpoint_lock_wait_s = 60.0;  // wait this long for another job's lock on the folder
  bool checkpoint_allow_resize = false;  // restore a checkpoint of another world size
  // Rank 0, set by accept: the folder's lock, held from before its first stage to its end; every
  // checkpoint store of the run shares it (checkpoint/folder_lock.h).
  std::shared_ptr<const FolderLock> checkpoint_lock;
  std::string resume = "none";  // none, auto, require
  DataConfig data;
  double epochs = 0;  // > 0: train.steps follows from the dataset (ceil(epochs * samples / batch))
  TestHooks test;
};

// xxh3-128 over exactly the options that decide the training state: a checkpoint restores only
// into a run with the same hash (docs/report.md, "Scenario hash").
std::string scenario_hash(const TrainConfig& config);

// With model.batch_per_rank, the global batch once the world size is known; model.batch's stands.
void resolve_global_batch(TrainConfig& config, int world_size);

}  // namespace tp
