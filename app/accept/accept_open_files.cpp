#include "app/accept/accept_open_files.h"

#include <mpi.h>

#include <algorithm>
#include <map>

#include "app/report/gate.h"
#include "mpi/check.h"

namespace tp {

using nlohmann::json;

OpenFileNeed open_files_needed(const std::vector<std::string>& stages,
                               const std::vector<CollectiveOp>& sweep_ops, int world_size) {
  auto runs = [&](const char* stage) {
    return std::find(stages.begin(), stages.end(), stage) != stages.end();
  };
  const bool alltoall = runs("sweep") && std::find(sweep_ops.begin(), sweep_ops.end(),
                                                   CollectiveOp::alltoall) != sweep_ops.end();
  const std::string at = " at " + std::to_string(world_size) + " ranks";
  std::string why;
  if (runs("pairwise"))
    why = "the pairwise pass" + at;
  else if (alltoall)
    why = "the sweep's alltoall" + at;
  const uint64_t peers = uint64_t(std::max(0, world_size - 1));
  return {kOpenFilesBase + (why.empty() ? kOpenFilesFewPeers : kOpenFilesPerPeer * peers), why};
}

json open_files_check(const OpenFileNeed& need, const std::vector<OpenFileLimit>& by_rank,
                      const std::vector<std::string>& host_of_rank) {
  uint64_t lowest = UINT64_MAX;
  size_t raised = 0;
  std::map<std::string, const OpenFileLimit*> short_hosts;  // one rank's figures per host
  for (size_t r = 0; r < by_rank.size(); ++r) {
    const OpenFileLimit& l = by_rank[r];
    lowest = std::min(lowest, l.soft);
    if (l.soft > l.soft_before) ++raised;
    if (l.soft < need.files && r < host_of_rank.size()) short_hosts.emplace(host_of_rank[r], &l);
  }
  const std::string needs = std::to_string((need.files)) + " open files" +
                            (need.why.empty() ? std::string() : " (" + need.why + ")");
  if (short_hosts.empty())
    return gate_check(
        "open_files", lowest == UINT64_MAX ? json() : json(lowest), need.files, "pass",
        "every rank may open " + needs +
            (raised ? "; the soft limit was raised on " + std::to_string((raised)) + " rank(s)"
                    : std::string()));
  std::string hosts;
  size_t named = 0;
  for (const auto& [host, l] : short_hosts) {
    if (named++ == 8) break;
    hosts += (hosts.empty() ? "" : ", ") + host + " (soft " + std::to_string((l->soft)) +
             ", hard " + std::to_string((l->hard)) + (l->problem.empty() ? "" : "; " + l->problem) +
             ")";
  }
  if (short_hosts.size() > 8)
    hosts += " and " + std::to_string((short_hosts.size() - 8)) + " more host(s)";
  return gate_check("open_files", lowest, need.files, "fail",
                    "the open-file limit (ulimit -n) is below the " + needs + " on " + hosts +
                        ": raise the hard limit (limits.conf nofile, or Slurm's "
                        "PropagateResourceLimits from a shell that has it)");
}

json open_files_stage(const OpenFileNeed& need, const World& world) {
  const OpenFileLimit mine = ensure_open_files(need.files);
  // Three numbers a rank: 96 KiB at rank 0 for 4,096 ranks. A failed read counts as no files.
  const uint64_t sent[3] = {mine.soft_before, mine.problem.empty() ? mine.soft : 0, mine.hard};
  std::vector<uint64_t> all(world.rank == 0 ? size_t(world.size) * 3 : 0);
  mpiCheck(MPI_Gather(sent, 3, MPI_UINT64_T, all.data(), 3, MPI_UINT64_T, 0, world.comm));
  if (world.rank != 0) return nullptr;
  std::vector<OpenFileLimit> by_rank(size_t(world.size));
  for (size_t r = 0; r < by_rank.size(); ++r) {
    by_rank[r].soft_before = all[3 * r];
    by_rank[r].soft = all[3 * r + 1];
    by_rank[r].hard = all[3 * r + 2];
  }
  return open_files_check(need, by_rank, world.host_of_rank);
}

}  // namespace tp
