#include "fabric/bus_bandwidth.h"

#include <algorithm>
#include <sstream>

#include "common/errors.h"

namespace tp {

const std::vector<CollectiveOp>& all_sweep_ops() {
  static const std::vector<CollectiveOp> ops = {
      CollectiveOp::allreduce, CollectiveOp::allgather, CollectiveOp::reducescatter,
      CollectiveOp::broadcast, CollectiveOp::alltoall,  CollectiveOp::sendrecv};
  return ops;
}

std::string sweep_op_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::allreduce:
      return "allreduce";
    case CollectiveOp::allgather:
      return "allgather";
    case CollectiveOp::reducescatter:
      return "reducescatter";
    case CollectiveOp::broadcast:
      return "broadcast";
    case CollectiveOp::alltoall:
      return "alltoall";
    case CollectiveOp::sendrecv:
      return "sendrecv";
  }
  return "unknown";
}

std::optional<CollectiveOp> parse_sweep_op(const std::string& name) {
  for (const CollectiveOp op : all_sweep_ops())
    if (sweep_op_name(op) == name) return op;
  return std::nullopt;
}

std::vector<CollectiveOp> parse_sweep_ops(const std::string& list, const std::string& option) {
  if (list == "all") return all_sweep_ops();
  std::vector<bool> wanted(all_sweep_ops().size(), false);
  std::stringstream words(list);
  std::string word;
  bool any = false;
  while (std::getline(words, word, ',')) {
    const std::optional<CollectiveOp> op = parse_sweep_op(word);
    if (!op)
      throw UsageError(option + ": unknown operation '" + word +
                       "' (allreduce, allgather, reducescatter, broadcast, alltoall, sendrecv, "
                       "or all)");
    wanted[size_t(*op)] = true;
    any = true;
  }
  if (!any) throw UsageError(option + ": no operation given (a comma list, or all)");
  std::vector<CollectiveOp> ops;
  for (const CollectiveOp op : all_sweep_ops())
    if (wanted[size_t(op)]) ops.push_back(op);
  return ops;
}

double busbw_factor(CollectiveOp op, int ranks) {
  const double n = std::max(ranks, 1);
  switch (op) {
    case CollectiveOp::allreduce:
      return 2.0 * (n - 1) / n;
    case CollectiveOp::allgather:
    case CollectiveOp::reducescatter:
    case CollectiveOp::alltoall:
      return (n - 1) / n;
    case CollectiveOp::broadcast:
    case CollectiveOp::sendrecv:
      return 1.0;
  }
  return 0.0;
}

double algbw_gbps(uint64_t bytes, double seconds) {
  return seconds > 0 ? double(bytes) / seconds / 1e9 : 0.0;
}

double busbw_gbps(CollectiveOp op, int ranks, uint64_t bytes, double seconds) {
  return algbw_gbps(bytes, seconds) * busbw_factor(op, ranks);
}

}  // namespace tp
