#pragma once
// accept's preflight stage (docs/acceptance.md, "Stages"): before anything is timed, every node's
// inventory, versions and topology (the topology preflight), and a probe of the checkpoint and
// data folders from every rank, so a node that cannot reach the storage is named up front.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/accept/accept_health.h"
#include "app/accept/accept_open_files.h"
#include "mpi/world.h"
#include "node/inventory_spec.h"
#include "train/train_config.h"

namespace tp {

struct PreflightStage {
  nlohmann::json section;  // rank 0: the report's `preflight` section
  nlohmann::json checks;   // rank 0: inventory, gpu_health, open_files, topology, folder_probe
  nlohmann::json nodes;    // rank 0: the topology preflight's nodes, for the context
  // rank 0: each node's inventory findings, then its GPUs' (host, nodes[].findings[] entry)
  std::vector<std::pair<std::string, nlohmann::json>> inventory_findings;
  NodeRead read;  // every rank: its node's machine and driver, for the read after the load
};

// `inventory` is the host file's [inventory] (`host_file`), judged on every node's first rank;
// `open_files`, what the selected stages need of every rank's open-file limit.
PreflightStage preflight_stage(const TrainConfig& config, const World& world,
                               const InventorySpec& inventory, const std::string& host_file,
                               const OpenFileNeed& open_files);

// One rank's probe of one folder.
struct FolderProbe {
  std::string problem;  // "" when the folder worked
  double seconds = 0;   // write + fsync + read back + delete (a checkpoint folder), or reading
                        // the dataset's index
};
// Checkpoint folders are written to, inside a folder of the run's own that rank 0 makes under
// checkpoint.dir (mkdtemp: a new name, mode 0700) and removes once every rank has probed: nothing
// already in checkpoint.dir is opened, so a planted link or another job's files stay untouched.
// Each rank creates its file there exclusively (O_EXCL | O_NOFOLLOW), writes, syncs, reads it back
// and deletes it. A dataset is only read (it may be read-only storage).
struct ProbeFolder {
  std::string path;     // "" when it could not be made
  std::string problem;  // why not
};
ProbeFolder make_probe_folder(const std::string& checkpoint_dir);
FolderProbe probe_checkpoint_folder(const std::string& probe_folder, int rank);
void remove_probe_folder(const std::string& probe_folder);
FolderProbe probe_data_folder(const std::string& dir);

// Pure: the folder_probe check from every rank's probe of each folder ({role, dir} -> [rank]).
nlohmann::json folder_probe_check(const std::vector<std::string>& roles,
                                  const std::vector<std::vector<FolderProbe>>& by_rank,
                                  const std::vector<std::string>& host_of_rank);

}  // namespace tp
