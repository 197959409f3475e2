#include "fabric/sweep_runner.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/clock.h"
#include "common/stats.h"
#include "fabric/sweep_data.h"
#include "mpi/check.h"

namespace tp {
namespace {

// One row's buffers, inputs and expected output, shared by its out-of-place and in-place runs.
struct RowData {
  CollectiveOp op;
  ElementType type;
  uint64_t count;
  RowShape shape;
  std::vector<unsigned char> input;  // this rank's input, encoded
  std::vector<int64_t> expected;     // this rank's output
};

CollectiveCall call_for(const RowData& row, const SweepGroup& group, void* send, void* recv,
                        bool in_place) {
  const int rank = group.collective.group_rank(), ranks = group.collective.group_size();
  CollectiveCall call;
  call.op = row.op;
  call.type = row.type;
  call.send = in_place ? nullptr : send;
  call.recv = recv;
  call.send_count = row.shape.send_count;
  call.recv_count = row.shape.recv_count;
  call.in_place = in_place;
  call.root = 0;
  if (row.op == CollectiveOp::sendrecv) {
    call.send_to = (rank + 1) % ranks;
    call.recv_from = (rank + ranks - 1) % ranks;
  }
  return call;
}

// The input goes where the call reads it: in place, allgather's at this rank's block of the one
// buffer, every other operation's at its start.
void load_input(const RowData& row, const SweepGroup& group, const CollectiveCall& call) {
  Collective& c = group.collective;
  if (!call.in_place) {
    c.copy_in(const_cast<void*>(call.send), row.input.data(), row.input.size());
    return;
  }
  const size_t offset =
      row.op == CollectiveOp::allgather ? row.input.size() * size_t(c.group_rank()) : 0;
  c.copy_in(static_cast<unsigned char*>(call.recv) + offset, row.input.data(), row.input.size());
}

double group_sum(const SweepGroup& group, double mine) {
  double total = 0;
  mpiCheck(MPI_Allreduce(&mine, &total, 1, MPI_DOUBLE, MPI_SUM, group.comm));
  return total;
}

// nccl-tests' time: back-to-back iterations, one wait at the end, divided by their count; the
// row's time is the mean of the ranks' times.
double timed_mean_seconds(const SweepGroup& group, const CollectiveCall& call, int iters) {
  mpiCheck(MPI_Barrier(group.comm));
  const double started = steady_seconds();
  for (int i = 0; i < iters; ++i) group.collective.run(call);
  group.collective.synchronize();
  const double mine = (steady_seconds() - started) / iters;
  return group_sum(group, mine) / group.collective.group_size();
}

// Each iteration waited for and timed alone; an iteration takes as long as its slowest rank.
// `mine` receives this rank's own times.
std::vector<double> per_iteration_seconds(const SweepGroup& group, const CollectiveCall& call,
                                          int iters, std::vector<double>& mine) {
  mine.assign(static_cast<size_t>(iters), 0.0);
  std::vector<double> slowest(mine.size());
  mpiCheck(MPI_Barrier(group.comm));
  for (double& t : mine) {
    const double started = steady_seconds();
    group.collective.run(call);
    group.collective.synchronize();
    t = steady_seconds() - started;
  }
  mpiCheck(MPI_Allreduce(mine.data(), slowest.data(), iters, MPI_DOUBLE, MPI_MAX, group.comm));
  return slowest;
}

// A fresh input and one more call, outside the timed region: in place, the timed iterations
// have overwritten the input with their results.
void check_result(const SweepGroup& group, const RowData& row, const CollectiveCall& call,
                  int corrupt_rank, SweepRow& out) {
  Collective& c = group.collective;
  load_input(row, group, call);
  const void* result = c.run(call);
  c.synchronize();
  const size_t width = sweep_type_bytes(row.type);
  std::vector<unsigned char> received(row.expected.size() * width);
  c.copy_out(received.data(), result, received.size());
  if (corrupt_rank == c.group_rank() && !received.empty()) received[received.size() / 2] ^= 0x40;
  const uint64_t wrong = count_wrong(row.type, received.data(), row.expected);
  const double total = group_sum(group, double(wrong));
  int first = wrong > 0 ? c.group_rank() : c.group_size();
  mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, group.comm));
  out.wrong = uint64_t(total);
  out.first_wrong_rank = first < c.group_size() ? group.world_rank_of.at(size_t(first)) : -1;
}

SweepRow run_row(const SweepGroup& group, const RowData& row, void* send, void* recv, bool in_place,
                 const SweepPlan& plan) {
  Collective& c = group.collective;
  SweepRow out;
  out.op = row.op;
  out.type = row.type;
  out.count = row.count;
  out.bytes = row.count * sweep_type_bytes(row.type);
  out.in_place = in_place;
  out.root = row.op == CollectiveOp::broadcast ? 0 : -1;
  out.not_run = c.cannot_run(row.op, row.type, in_place);
  if (!out.not_run.empty()) return out;
  const CollectiveCall call = call_for(row, group, send, recv, in_place);
  load_input(row, group, call);
  for (int i = 0; i < plan.warmup; ++i) c.run(call);
  c.synchronize();
  const double mean_s = timed_mean_seconds(group, call, plan.iters);
  const std::vector<double> each =
      per_iteration_seconds(group, call, plan.iters, out.rank_iteration_s);
  out.iteration_s = each;
  out.mean_us = mean_s * 1e6;
  out.p50_us = percentile(each, 50) * 1e6;
  out.p99_us = percentile(each, 99) * 1e6;
  out.algbw_gbps = algbw_gbps(out.bytes, mean_s);
  out.busbw_gbps = busbw_gbps(row.op, c.group_size(), out.bytes, mean_s);
  check_result(group, row, call, plan.corrupt_rank, out);
  return out;
}

RowData row_data(CollectiveOp op, ElementType type, int ranks, int rank, uint64_t bytes) {
  RowData row{op, type, row_count(op, type, ranks, bytes), {}, {}, {}};
  row.shape = row_shape(op, ranks, row.count);
  row.input = encode(type, row_input(op, type, ranks, rank, row.count));
  row.expected = row_expected(op, type, ranks, rank, row.count);
  return row;
}

}  // namespace

std::vector<uint64_t> sweep_sizes(uint64_t min_bytes, uint64_t max_bytes, double factor,
                                  uint64_t unit) {
  std::vector<uint64_t> sizes;
  double size = double(min_bytes);
  while (size <= double(max_bytes) && sizes.size() <= kMaxSweepSizes) {
    const uint64_t whole = uint64_t(std::llround(size));
    if (sizes.empty() || whole >= sizes.back() + unit) sizes.push_back(whole);
    // A factor so close to 1 that the product rounds back to the same size still moves on.
    size = std::max(size * factor, double(sizes.back() + unit));
  }
  if (sizes.size() <= kMaxSweepSizes && (sizes.empty() || sizes.back() < max_bytes))
    sizes.push_back(max_bytes);
  return sizes;
}

uint64_t sweep_host_bytes(uint64_t max_bytes, ElementType type, bool buffers_on_host) {
  const uint64_t expected = max_bytes / sweep_type_bytes(type) * sizeof(int64_t);
  return (buffers_on_host ? 2 * max_bytes : 0) + 2 * max_bytes + expected;
}

uint64_t auto_sweep_max_bytes(int world_size, uint64_t at_least) {
  constexpr uint64_t kBase = uint64_t(64) << 20, kMost = uint64_t(16) << 30;
  uint64_t bytes = kBase;
  for (int ranks = 32; ranks < world_size && bytes < kMost; ranks *= 2) bytes *= 2;
  return std::min(kMost, std::max(bytes, at_least));
}

uint64_t fit_sweep_max_bytes(uint64_t max_bytes, uint64_t min_bytes, ElementType type,
                             bool buffers_on_host, int local_ranks, uint64_t available) {
  const auto fits = [&](uint64_t bytes) {
    return double(sweep_host_bytes(bytes, type, buffers_on_host)) * std::max(1, local_ranks) <=
           0.9 * double(available);
  };
  uint64_t bytes = max_bytes;
  while (!fits(bytes) && bytes / 2 >= std::max<uint64_t>(min_bytes, 1)) bytes /= 2;
  return fits(bytes) ? bytes : 0;
}

uint64_t row_count(CollectiveOp op, ElementType type, int ranks, uint64_t bytes) {
  const uint64_t count = bytes / sweep_type_bytes(type);
  const bool divided = op == CollectiveOp::allgather || op == CollectiveOp::reducescatter ||
                       op == CollectiveOp::alltoall;
  const uint64_t n = uint64_t(std::max(ranks, 1));
  return divided ? count / n * n : count;
}

std::vector<SweepRow> run_sweep(const SweepGroup& group, const SweepPlan& plan,
                                const std::function<void(const SweepRow&)>& on_row) {
  Collective& c = group.collective;
  const std::vector<uint64_t> sizes =
      sweep_sizes(plan.min_bytes, plan.max_bytes, plan.factor, sweep_type_bytes(plan.type));
  // Every row's buffers fit in max_bytes: counts follow nccl-tests' whole-buffer convention.
  const size_t capacity = size_t(sizes.back()) + 64;
  const std::shared_ptr<void> send = c.allocate(capacity), recv = c.allocate(capacity);
  std::vector<SweepRow> rows;
  for (CollectiveOp op : plan.ops) {
    for (uint64_t bytes : sizes) {
      const RowData row = row_data(op, plan.type, c.group_size(), c.group_rank(), bytes);
      for (bool in_place : {false, true}) {
        rows.push_back(run_row(group, row, send.get(), recv.get(), in_place, plan));
        if (on_row) on_row(rows.back());
      }
    }
  }
  return rows;
}

std::optional<double> average_busbw(const std::vector<SweepRow>& rows, uint64_t min_bytes) {
  double total = 0;
  int counted = 0;
  for (const SweepRow& row : rows) {
    if (!row.not_run.empty() || row.bytes < min_bytes) continue;
    total += row.busbw_gbps;
    ++counted;
  }
  if (counted == 0) return std::nullopt;
  return total / counted;
}

}  // namespace tp
