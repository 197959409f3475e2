// The pairwise pass's check against its transfers, per round (docs/benchmarks.md, "The pairwise
// check"): two ranks run one round of the real pass (fabric/pairwise.h) over MPI, and report the
// median transfer, the receiver's check of what arrived (a digest compared with the sender's),
// and, as the reference it replaced, a check that regenerates the sender's pattern and compares
// every element. Then the negative control: a flipped bit must be counted. Prints one JSON object
// from rank 0. Run: mpirun -np 2 build/bench/pairwise_check [--bytes=67108864] [--iters=5]
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/clock.h"
#include "fabric/pairwise.h"
#include "fabric/sweep_data.h"
#include "mpi/world.h"

namespace {

tp::PairPlan parse(int argc, char** argv) {
  tp::PairPlan plan;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--bytes=", 0) == 0) {
      plan.bytes = std::strtoull(argv[i] + 8, nullptr, 10);
    } else if (arg.rfind("--iters=", 0) == 0) {
      plan.iters = std::atoi(argv[i] + 8);
    } else {
      std::fprintf(stderr, "pairwise_check: unknown argument %s\n", argv[i]);
      std::exit(2);
    }
  }
  return plan;
}

// The check the digest replaced: the sender's pattern regenerated, every element compared.
double element_check_seconds(int sender, uint64_t count) {
  const std::vector<unsigned char> got =
      tp::encode(tp::ElementType::f32,
                 tp::row_input(tp::CollectiveOp::sendrecv, tp::ElementType::f32, 1, sender, count));
  const double started = tp::steady_seconds();
  std::vector<int64_t> expected(count);
  for (uint64_t i = 0; i < count; ++i)
    expected[i] = tp::input_value(tp::ElementType::f32, 1, sender, i);
  const uint64_t wrong = tp::count_wrong(tp::ElementType::f32, got.data(), expected);
  const double seconds = tp::steady_seconds() - started;
  if (wrong != 0) std::abort();
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const tp::PairPlan plan = parse(argc, argv);
  tp::World world = tp::make_world("");
  if (world.size != 2) {
    if (world.rank == 0) std::fprintf(stderr, "pairwise_check: run it on 2 ranks\n");
    MPI_Finalize();
    return 2;
  }
  auto collective = tp::make_mpi_collective(world, false);
  const std::vector<std::vector<tp::RankPair>> round = {{{0, 1}}};
  const auto received = tp::measure_rounds(*collective, world.comm, round, plan);
  tp::PairPlan corrupted = plan;
  corrupted.corrupt_rank = 1;
  const auto control = tp::measure_rounds(*collective, world.comm, round, corrupted);
  const double reference = element_check_seconds(1 - world.rank, plan.bytes / 4);
  uint64_t control_wrong = world.rank == 1 ? control.at(0).wrong + control.at(1).wrong : 0;
  MPI_Bcast(&control_wrong, 1, MPI_UINT64_T, 1, world.comm);
  if (world.rank == 0) {
    const tp::PairTransfer& one_way = received.at(0);
    // A round: three timed phases of warm-up and iterations; two checks on each receiver.
    const double transfers = 3.0 * (plan.warmup + plan.iters) * one_way.seconds;
    const double checks = received.at(0).check_seconds + received.at(1).check_seconds;
    std::printf(
        "{\"bytes\": %llu, \"iters\": %d, \"transfer_s\": %.6f, \"round_transfers_s\": %.6f, "
        "\"digest_check_s\": %.6f, \"round_checks_s\": %.6f, \"element_check_s\": %.6f, "
        "\"round_checks_per_transfers\": %.3f, \"element_check_per_transfer\": %.3f, "
        "\"wrong_clean\": %llu, \"wrong_with_a_flipped_bit\": %llu}\n",
        static_cast<unsigned long long>(plan.bytes), plan.iters, one_way.seconds, transfers,
        one_way.check_seconds, checks, reference, checks / transfers, reference / one_way.seconds,
        static_cast<unsigned long long>(received[0].wrong + received[1].wrong),
        static_cast<unsigned long long>(control_wrong));
  }
  collective.reset();  // its communicator goes before MPI does
  tp::free_world(world);
  MPI_Finalize();
  // The control must be caught: one wrong element in each buffer rank 1 received.
  return control_wrong == 2 ? 0 : 1;
}
