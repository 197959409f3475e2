#pragma once
// accept's open-file check (docs/acceptance.md, "Open files"): before anything talks to many
// peers, every rank's open-file limit against what the selected stages need at this world size.
// A soft limit below the need is raised up to the hard one; a hard limit below it fails the
// preflight, naming the limit, the need and the hosts.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/accept/open_files.h"
#include "mpi/collective.h"
#include "mpi/world.h"

namespace tp {

// Files a rank keeps open whatever it runs: libraries, logs, the heartbeat, HDF5, the driver.
inline constexpr uint64_t kOpenFilesBase = 256;
// Where a stage talks to every peer: a socket per peer for MPI's TCP transport and one for NCCL's
// bootstrap and proxy.
inline constexpr uint64_t kOpenFilesPerPeer = 2;
// Where no stage does: ring and tree neighbours, a handful of peers whatever the world size.
inline constexpr uint64_t kOpenFilesFewPeers = 64;

struct OpenFileNeed {
  uint64_t files = 0;
  std::string why;  // "the pairwise pass at 4096 ranks", or "" where no stage talks to every peer
};

// Pure: what `stages` need at `world_size` ranks (the sweep needs every peer only where `sweep_ops`
// has alltoall).
OpenFileNeed open_files_needed(const std::vector<std::string>& stages,
                               const std::vector<CollectiveOp>& sweep_ops, int world_size);

// Pure: the open_files check from every rank's limit (after any raise).
nlohmann::json open_files_check(const OpenFileNeed& need, const std::vector<OpenFileLimit>& by_rank,
                                const std::vector<std::string>& host_of_rank);

// Collective: raises this rank's soft limit where it can and gathers every rank's at rank 0, which
// returns the check (the others return null).
nlohmann::json open_files_stage(const OpenFileNeed& need, const World& world);

}  // namespace tp
