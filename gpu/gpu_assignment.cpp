#include "gpu/gpu_assignment.h"

#include <algorithm>
#include <map>
#include <set>

namespace tp {
namespace {

bool overlaps(const std::vector<int>& a, const std::vector<int>& b) {
  const std::set<int> mine(a.begin(), a.end());
  return std::any_of(b.begin(), b.end(), [&](int cpu) { return mine.count(cpu) > 0; });
}

// The lowest unclaimed index, preferring one whose CPUs the rank may run on; -1 when all are taken.
GpuChoice pick(const RankGpuView& rank, const std::vector<bool>& claimed) {
  for (bool want_local : {true, false})
    for (size_t i = 0; i < rank.uuids.size(); ++i) {
      if (claimed[i]) continue;
      const bool local = i < rank.gpu_cpus.size() && overlaps(rank.gpu_cpus[i], rank.affinity);
      if (want_local && !local) continue;
      return {int(i), local};
    }
  return {};
}

}  // namespace

std::vector<GpuChoice> assign_gpus(const std::vector<RankGpuView>& local_ranks) {
  std::vector<GpuChoice> choices(local_ranks.size());
  // The group's claims, keyed by the set of UUIDs its ranks see, indexed like the first rank's
  // list.
  std::map<std::set<std::string>, std::vector<bool>> claims;
  for (size_t r = 0; r < local_ranks.size(); ++r) {
    const RankGpuView& rank = local_ranks[r];
    if (rank.uuids.empty()) continue;
    const std::set<std::string> key(rank.uuids.begin(), rank.uuids.end());
    std::vector<bool>& claimed = claims[key];
    if (claimed.empty() || std::all_of(claimed.begin(), claimed.end(), [](bool c) { return c; }))
      claimed.assign(rank.uuids.size(), false);
    // Claims are kept by UUID order of this rank's list: ranks of a group may list them in
    // different orders (CUDA_VISIBLE_DEVICES per task), so translate through the UUIDs.
    std::vector<bool> mine(rank.uuids.size(), false);
    const std::vector<std::string> order(key.begin(), key.end());
    for (size_t i = 0; i < rank.uuids.size(); ++i) {
      const size_t slot =
          size_t(std::find(order.begin(), order.end(), rank.uuids[i]) - order.begin());
      mine[i] = claimed[slot];
    }
    choices[r] = pick(rank, mine);
    const std::string& uuid = rank.uuids[size_t(choices[r].visible_index)];
    claimed[size_t(std::find(order.begin(), order.end(), uuid) - order.begin())] = true;
  }
  return choices;
}

}  // namespace tp
