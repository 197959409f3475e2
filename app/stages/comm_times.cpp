#include "app/stages/comm_times.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "common/sysinfo.h"
#include "mpi/check.h"
#include "mpi/collective_ledger.h"

namespace tp {
namespace {

using nlohmann::json;

// min, p50 and max of `slot` over the ranks that timed it, with the slowest rank and its host;
// null when none did.
json spread_of(const std::vector<CommTimeRow>& rows, size_t slot,
               const std::vector<std::string>& hosts) {
  std::vector<double> values;
  int slowest = -1;
  for (size_t r = 0; r < rows.size(); ++r) {
    const double v = rows[r][slot];
    if (v < 0) continue;
    values.push_back(v);
    if (slowest < 0 || v > rows[size_t(slowest)][slot]) slowest = int(r);
  }
  if (values.empty()) return nullptr;
  const auto middle = values.begin() + long(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  const double p50 = *middle;
  return {{"min", *std::min_element(values.begin(), values.end())},
          {"p50", p50},
          {"max", rows[size_t(slowest)][slot]},
          {"slowest_rank", slowest},
          {"slowest_host", size_t(slowest) < hosts.size() ? json(hosts[size_t(slowest)]) : json()},
          {"ranks", values.size()}};
}

std::string expand_debug_file(std::string pattern) {
  for (size_t at = pattern.find('%'); at != std::string::npos && at + 1 < pattern.size();
       at = pattern.find('%', at)) {
    const char what = pattern[at + 1];
    const std::string with = what == 'h'   ? host_name()
                             : what == 'p' ? std::to_string(::getpid())
                                           : std::string(1, what);
    pattern.replace(at, 2, with);
    at += with.size();
  }
  return pattern;
}

}  // namespace

json comm_times_json(const std::vector<CommTimeRow>& by_rank,
                     const std::vector<std::string>& host_of_rank, const std::string& backend) {
  json out = json::array();
  for (int kind = 0; kind < kCommKinds; ++kind) {
    json first = json::object(), steady = json::object();
    for (int op = 0; op < kCommOps; ++op) {
      json f = spread_of(by_rank, size_t(first_slot(kind, CollectiveOp(op))), host_of_rank);
      json s = spread_of(by_rank, size_t(steady_slot(kind, CollectiveOp(op))), host_of_rank);
      if (!f.is_null()) first[op_name(CollectiveOp(op))] = std::move(f);
      if (!s.is_null()) steady[op_name(CollectiveOp(op))] = std::move(s);
    }
    json set_up = spread_of(by_rank, size_t(set_up_slot(kind)), host_of_rank);
    if (set_up.is_null() && first.empty()) continue;
    json entry = {{"comm", kCommKindNames[kind]},
                  {"backend", backend},
                  {"set_up_s", set_up},
                  {"first_s", first},
                  {"steady_s", steady}};
    if (kind == 0) {
      json nccl = json::object();
      const char* parts[kNcclInitSlots] = {"total", "bootstrap", "connections"};
      for (int i = 0; i < kNcclInitSlots; ++i)
        if (json s = spread_of(by_rank, size_t(kCommTimeSlots + i), host_of_rank); !s.is_null())
          nccl[parts[i]] = std::move(s);
      if (!nccl.empty()) entry["nccl_init_timings_s"] = std::move(nccl);
    }
    out.push_back(std::move(entry));
  }
  return out;
}

std::optional<NcclInitTimings> nccl_init_timings_of_this_process(int world_size) {
  const char* file = std::getenv("NCCL_DEBUG_FILE");
  if (!file || !*file) return std::nullopt;
  std::ifstream in(expand_debug_file(file));
  for (std::string line; std::getline(in, line);)
    if (const auto t = parse_nccl_init_timings(line); t && t->nranks == world_size) return t;
  return std::nullopt;
}

json gather_comm_times(const World& world, const std::string& backend) {
  CommTimeRow mine;
  mine.fill(-1.0);
  const auto slots = process_comm_times().slots();
  std::copy(slots.begin(), slots.end(), mine.begin());
  if (const auto nccl = nccl_init_timings_of_this_process(world.size)) {
    mine[kCommTimeSlots] = nccl->total;
    for (const auto& [name, seconds] : nccl->parts) {
      if (name == "bootstrap") mine[kCommTimeSlots + 1] = seconds;
      if (name == "connections") mine[kCommTimeSlots + 2] = seconds;
    }
  }
  std::vector<CommTimeRow> all(world.rank == 0 ? size_t(world.size) : 0);
  mpiCheck(MPI_Gather(mine.data(), int(mine.size()), MPI_DOUBLE, all.data(), int(mine.size()),
                      MPI_DOUBLE, 0, world.comm));
  if (world.rank != 0) return nullptr;
  return comm_times_json(all, world.host_of_rank, backend);
}

}  // namespace tp
