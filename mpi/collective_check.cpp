#include "mpi/collective_check.h"

#include <vector>

#include "mpi/check.h"

namespace tp {
namespace {

int64_t count_wrong(const std::vector<float>& values, int world_size) {
  // sum over r of 1 + (i + r) % 3, by residue class of i.
  float expected[3] = {0, 0, 0};
  for (int residue = 0; residue < 3; ++residue)
    for (int r = 0; r < world_size; ++r) expected[residue] += float(1 + (residue + r) % 3);
  int64_t wrong = 0;
  for (size_t i = 0; i < values.size(); ++i) wrong += values[i] != expected[i % 3];
  return wrong;
}

}  // namespace

CollectiveCheck check_allreduce(Collective& collective, const World& world,
                                const ReductionBuffer& buffer, int corrupt_rank) {
  const size_t count = buffer.count;
  std::vector<float> pattern(count), blocking(count), nonblocking(count);
  for (size_t i = 0; i < count; ++i) pattern[i] = float(1 + (i + size_t(world.rank)) % 3);
  buffer.write(pattern);
  collective.allreduce_sum(buffer.data, count);
  buffer.read(blocking);
  buffer.write(pattern);
  collective.start_allreduce_sum(buffer.data, count);
  collective.wait_all();
  buffer.read(nonblocking);
  collective.take_comm_timing();
  if (world.rank == corrupt_rank && count > 0) nonblocking[0] += 1.0f;

  const int64_t mine = count_wrong(blocking, world.size) + count_wrong(nonblocking, world.size);
  CollectiveCheck result;
  result.checked_elements = int64_t(count) * 2 * world.size;
  mpiCheck(MPI_Allreduce(&mine, &result.wrong_elements, 1, MPI_INT64_T, MPI_SUM, world.comm));
  const int candidate = mine > 0 ? world.rank : world.size;
  mpiCheck(MPI_Allreduce(&candidate, &result.first_wrong_rank, 1, MPI_INT, MPI_MIN, world.comm));
  if (result.first_wrong_rank == world.size) result.first_wrong_rank = -1;
  return result;
}

}  // namespace tp
