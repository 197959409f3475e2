#include "mpi/collective.h"

#include <algorithm>

#include "common/errors.h"

namespace tp {
namespace {

[[noreturn]] void not_implemented(const Collective& c, const char* what) {
  throw RuntimeError("the " + c.name() + " collective has no " + what +
                     ": it implements the training step's allreduce only");
}

bool divides(size_t total, int parts) {
  return parts > 0 && total % size_t(parts) == 0;
}

std::string counts_problem(const CollectiveCall& c, int n) {
  switch (c.op) {
    case CollectiveOp::allreduce:
    case CollectiveOp::broadcast:
      return c.send_count == c.recv_count ? "" : "send and receive counts differ";
    case CollectiveOp::allgather:
      return c.recv_count == c.send_count * size_t(n) ? "" : "receive count is not send x ranks";
    case CollectiveOp::reducescatter:
      return c.send_count == c.recv_count * size_t(n) ? "" : "send count is not receive x ranks";
    case CollectiveOp::alltoall:
      return c.send_count == c.recv_count && divides(c.send_count, n)
                 ? ""
                 : "counts differ or are not a multiple of the ranks";
    case CollectiveOp::sendrecv:
      // In place, one buffer is sent and received into (MPI_Sendrecv_replace).
      if (c.in_place)
        return c.send_to >= 0 && c.recv_from >= 0 && c.send_count == c.recv_count
                   ? ""
                   : "sendrecv in place needs both peers and equal counts";
      return c.send_to < 0 || c.recv_from < 0 || c.send_count == c.recv_count
                 ? ""
                 : "send and receive counts differ";
  }
  return "unknown operation";
}

}  // namespace

double busy_seconds(std::vector<BucketTime> buckets) {
  std::sort(buckets.begin(), buckets.end(),
            [](const BucketTime& a, const BucketTime& b) { return a.start < b.start; });
  double busy = 0, open_start = 0, open_end = 0;
  bool open = false;
  for (const BucketTime& b : buckets) {
    if (open && b.start <= open_end) {
      open_end = std::max(open_end, b.end);
      continue;
    }
    if (open) busy += open_end - open_start;
    open_start = b.start;
    open_end = b.end;
    open = true;
  }
  return open ? busy + open_end - open_start : 0.0;
}

std::string Collective::cannot_run(CollectiveOp, ElementType, bool) const {
  return "the " + name() + " collective implements the training step's allreduce only";
}
std::shared_ptr<void> Collective::allocate(size_t) {
  not_implemented(*this, "sweep buffers");
}
void Collective::copy_in(void*, const void*, size_t) {
  not_implemented(*this, "sweep buffers");
}
void Collective::copy_out(void*, const void*, size_t) {
  not_implemented(*this, "sweep buffers");
}
const void* Collective::run(const CollectiveCall&) {
  not_implemented(*this, "sweep operations");
}
void Collective::synchronize() {
  not_implemented(*this, "sweep operations");
}
std::unique_ptr<Collective> Collective::split(int, int) {
  not_implemented(*this, "groups");
}

std::string invalid_call(const CollectiveCall& call, int group_size) {
  std::string problem = counts_problem(call, group_size);
  const auto outside = [&](int peer, bool none_allowed) {
    return peer >= group_size || peer < (none_allowed ? -1 : 0);
  };
  if (problem.empty() && call.op == CollectiveOp::broadcast && outside(call.root, false))
    problem = "root " + std::to_string(call.root) + " is outside the group";
  if (problem.empty() && call.op == CollectiveOp::sendrecv &&
      (outside(call.send_to, true) || outside(call.recv_from, true)))
    problem = "peer outside the group";
  if (problem.empty() && !call.in_place && call.send == nullptr && call.send_count > 0 &&
      !(call.op == CollectiveOp::sendrecv && call.send_to < 0))
    problem = "no send buffer";
  if (problem.empty() && call.recv == nullptr && call.recv_count > 0 &&
      !(call.op == CollectiveOp::sendrecv && call.recv_from < 0))
    problem = "no receive buffer";
  return problem;
}

}  // namespace tp
