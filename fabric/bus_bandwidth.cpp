#include "fabric/bus_bandwidth.h"

#include <algorithm>
#include <sstream>

#include "common/errors.h"

namespace tp {

const std::vector<SweepOp>& all_sweep_ops() {
  static const std::vector<SweepOp> ops = {SweepOp::allreduce,     SweepOp::allgather,
                                           SweepOp::reducescatter, SweepOp::broadcast,
                                           SweepOp::alltoall,      SweepOp::sendrecv};
  return ops;
}

std::string sweep_op_name(SweepOp op) {
  switch (op) {
    case SweepOp::allreduce:
      return "allreduce";
    case SweepOp::allgather:
      return "allgather";
    case SweepOp::reducescatter:
      return "reducescatter";
    case SweepOp::broadcast:
      return "broadcast";
    case SweepOp::alltoall:
      return "alltoall";
    case SweepOp::sendrecv:
      return "sendrecv";
  }
  return "unknown";
}

std::optional<SweepOp> parse_sweep_op(const std::string& name) {
  for (const SweepOp op : all_sweep_ops())
    if (sweep_op_name(op) == name) return op;
  return std::nullopt;
}

std::vector<SweepOp> parse_sweep_ops(const std::string& list, const std::string& option) {
  if (list == "all") return all_sweep_ops();
  std::vector<bool> wanted(all_sweep_ops().size(), false);
  std::stringstream words(list);
  std::string word;
  bool any = false;
  while (std::getline(words, word, ',')) {
    const std::optional<SweepOp> op = parse_sweep_op(word);
    if (!op)
      throw UsageError(option + ": unknown operation '" + word +
                       "' (allreduce, allgather, reducescatter, broadcast, alltoall, sendrecv, "
                       "or all)");
    wanted[size_t(*op)] = true;
    any = true;
  }
  if (!any) throw UsageError(option + ": no operation given (a comma list, or all)");
  std::vector<SweepOp> ops;
  for (const SweepOp op : all_sweep_ops())
    if (wanted[size_t(op)]) ops.push_back(op);
  return ops;
}

double busbw_factor(SweepOp op, int ranks) {
  const double n = std::max(ranks, 1);
  switch (op) {
    case SweepOp::allreduce:
      return 2.0 * (n - 1) / n;
    case SweepOp::allgather:
    case SweepOp::reducescatter:
    case SweepOp::alltoall:
      return (n - 1) / n;
    case SweepOp::broadcast:
    case SweepOp::sendrecv:
      return 1.0;
  }
  return 0.0;
}

double algbw_gbps(uint64_t bytes, double seconds) {
  return seconds > 0 ? double(bytes) / seconds / 1e9 : 0.0;
}

double busbw_gbps(SweepOp op, int ranks, uint64_t bytes, double seconds) {
  return algbw_gbps(bytes, seconds) * busbw_factor(op, ranks);
}

}  // namespace tp
