// The sweep on one rank (MPI_COMM_SELF): every operation's rows run, are checked, and a perturbed
// result is counted wrong and names the rank. Multi-rank sweeps run in
// tests/integration/test_sweep.py.
#include <gtest/gtest.h>

#include "fabric/pair_buffers.h"
#include "fabric/sweep_runner.h"
#include "one_rank.h"

namespace {

using tp::CollectiveOp;
using tp::ElementType;

tp::SweepPlan small_plan() {
  tp::SweepPlan plan;
  plan.ops = tp::all_sweep_ops();
  plan.min_bytes = 64;
  plan.max_bytes = 4096;
  plan.iters = 3;
  plan.warmup = 1;
  return plan;
}

TEST(SweepRunner, EveryOperationRunsAndIsRightOnOneRank) {
  const tp::World world = tp::test::one_rank_world();
  const auto collective = tp::make_mpi_collective(world, false);
  const tp::SweepGroup group{*collective, world.comm, {0}};
  for (ElementType type : {ElementType::f32, ElementType::i32}) {
    tp::SweepPlan plan = small_plan();
    plan.type = type;
    const auto rows = tp::run_sweep(group, plan, nullptr);
    // 6 ops x 7 sizes (64..4096), out of place and in place.
    ASSERT_EQ(rows.size(), 6u * 7u * 2u);
    for (const tp::SweepRow& row : rows) {
      SCOPED_TRACE(tp::sweep_op_name(row.op) + " " + std::to_string(row.bytes));
      EXPECT_EQ(row.wrong, 0u);
      EXPECT_EQ(row.first_wrong_rank, -1);
      // sendrecv too runs in place (MPI_Sendrecv_replace), as nccl-tests' sendrecv_perf does.
      EXPECT_EQ(row.not_run, "");
      EXPECT_GT(row.mean_us, 0.0);
      EXPECT_GE(row.p99_us, row.p50_us);
      ASSERT_EQ(row.iteration_s.size(), 3u) << "each timed iteration, for the trace";
      ASSERT_EQ(row.rank_iteration_s.size(), 3u);
      for (size_t i = 0; i < 3; ++i) EXPECT_GE(row.iteration_s[i], row.rank_iteration_s[i]);
      EXPECT_GT(row.algbw_gbps, 0.0);
      EXPECT_EQ(row.root, row.op == CollectiveOp::broadcast ? 0 : -1);
    }
  }
}

TEST(SweepRunner, APerturbedResultIsWrongAndNamesItsRank) {
  const tp::World world = tp::test::one_rank_world();
  const auto collective = tp::make_mpi_collective(world, false);
  const tp::SweepGroup group{*collective, world.comm, {5}};
  tp::SweepPlan plan = small_plan();
  plan.ops = {CollectiveOp::allreduce};
  plan.corrupt_rank = 0;
  const auto rows = tp::run_sweep(group, plan, nullptr);
  ASSERT_FALSE(rows.empty());
  for (const tp::SweepRow& row : rows) {
    EXPECT_EQ(row.wrong, 1u);
    EXPECT_EQ(row.first_wrong_rank, 5);  // the world rank, not the group rank
  }
}

// The negative control of the pairwise check's refill: a transfer that delivers nothing must not
// pass on what an earlier transfer from the same peer left in the buffer. Refilled with the
// receiver's own pattern, the buffer matches no peer's digest, so every element is counted wrong.
TEST(PairBuffers, ATransferThatDeliversNothingIsCaught) {
  const tp::World world = tp::test::one_rank_world();
  const auto collective = tp::make_mpi_collective(world, false);
  constexpr uint64_t kBytes = 4096;
  tp::PairBuffers receiver(*collective, 0, kBytes, -1);
  const tp::PairBuffers peer(*collective, 1, kBytes, -1);
  const uint64_t count = receiver.count();
  // Rank 1's pattern arrives whole (its send buffer into rank 0's receive buffer): right.
  tp::CollectiveCall from_peer = receiver.call(0, 0, count);
  from_peer.send = peer.call(0, 0, count).send;
  collective->run(from_peer);
  EXPECT_EQ(receiver.wrong_from(1, count, peer.sent_digest(count)), 0u);
  // The next transfer from rank 1 delivers nothing: without the refill the buffer would still
  // hold rank 1's pattern and pass.
  receiver.poison(count);
  EXPECT_EQ(receiver.wrong_from(1, count, peer.sent_digest(count)), count);
}

TEST(SweepRunner, MpiRefusesSixteenBitFloats) {
  const tp::World world = tp::test::one_rank_world();
  const auto collective = tp::make_mpi_collective(world, false);
  EXPECT_NE(collective->cannot_run(CollectiveOp::allreduce, ElementType::bf16, false), "");
  EXPECT_NE(collective->cannot_run(CollectiveOp::allreduce, ElementType::f16, false), "");
  EXPECT_EQ(collective->cannot_run(CollectiveOp::alltoall, ElementType::i32, true), "");
}

}  // namespace
