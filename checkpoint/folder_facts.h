#pragma once
// What the preflight learns about checkpoint.dir: its filesystem. (A folder that some rank does
// not share is an error in the preflight itself.) A node-local filesystem under a multi-node run
// means a rank that restarts elsewhere finds no checkpoint; that is reported before step 1.
#include <string>
#include <vector>

namespace tp {

struct CheckpointFolderFacts {
  std::string path;
  std::string filesystem;             // "ext2/3/4", "nfs", "lustre", ... or "unknown (0x...)"
  std::vector<std::string> warnings;  // what the preflight found (rank 0): no flock, overwrites
};

// The filesystem type of `path` (statfs), by name.
std::string filesystem_type(const std::string& path);
// True for filesystems that live on one node (ext2/3/4, xfs, btrfs, tmpfs, overlay, zfs).
bool node_local_filesystem(const std::string& type);
// The report's warnings about the folder, for a run over `hosts` distinct hosts.
std::vector<std::string> checkpoint_folder_warnings(const CheckpointFolderFacts& facts, int hosts);

}  // namespace tp
