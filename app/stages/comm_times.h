#pragma once
// Every rank's communicator timings (mpi/comm_timings.h) at rank 0, as the report's
// context.communicators (docs/report.md): per communicator kind, its set-up, the first call of
// each operation and the steady ones, each as min, p50 and max over the ranks with the slowest
// rank and its host; and NCCL's own `Init timings` where its debug file holds them.
#include <array>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "mpi/comm_timings.h"
#include "mpi/world.h"

namespace tp {

// NCCL's own figures, appended to a rank's slots: its Init timings total, bootstrap and
// connections (-1 where absent).
inline constexpr int kNcclInitSlots = 3;
using CommTimeRow = std::array<double, kCommTimeSlots + kNcclInitSlots>;

// Pure: the `communicators` array from every rank's row and host. O(ranks) per figure.
nlohmann::json comm_times_json(const std::vector<CommTimeRow>& by_rank,
                               const std::vector<std::string>& host_of_rank,
                               const std::string& backend);

// NCCL's Init timings for this process from the file NCCL_DEBUG_FILE names (%h host, %p pid),
// the first line of a communicator over `world_size` ranks; nothing where there is none.
std::optional<NcclInitTimings> nccl_init_timings_of_this_process(int world_size);

// Collective: this process's log gathered at rank 0 (96 bytes a rank); null elsewhere.
nlohmann::json gather_comm_times(const World& world, const std::string& backend);

}  // namespace tp
