#include "checkpoint/slices.h"

#include <mpi.h>

#include <cstdio>
#include <limits>
#include <vector>

#include "common/digest.h"
#include "common/errors.h"
#include "mpi/check.h"

namespace tp {

Slice rank_slice(uint64_t n, int rank, int ranks) {
  const uint64_t base = n / uint64_t(ranks);
  const uint64_t extra = n % uint64_t(ranks);
  const uint64_t r = uint64_t(rank);
  const uint64_t begin = r * base + (r < extra ? r : extra);
  return {begin, begin + base + (r < extra ? 1 : 0)};
}

TrainingState cut(const TrainingState& full, Slice slice) {
  const auto part = [&](const std::vector<float>& v) {
    if (v.empty()) return std::vector<float>{};
    return std::vector<float>(v.begin() + std::ptrdiff_t(slice.begin),
                              v.begin() + std::ptrdiff_t(slice.end));
  };
  TrainingState mine;
  mine.step = full.step;
  mine.params = part(full.params);
  mine.moment1 = part(full.moment1);
  mine.moment2 = part(full.moment2);
  return mine;
}

namespace {

// Every rank's slice as MPI counts and displacements.
void slice_counts(const World& world, uint64_t total, std::vector<int>& counts,
                  std::vector<int>& displs) {
  // MPI counts are int; a slice beyond 2^31 elements would need a derived datatype.
  counts.assign(size_t(world.size), 0);
  displs.assign(size_t(world.size), 0);
  for (int r = 0; r < world.size; ++r) {
    const Slice s = rank_slice(total, r, world.size);
    if (s.end > uint64_t(std::numeric_limits<int>::max()))
      throw RuntimeError("checkpoint slices beyond 2^31 elements are not supported");
    counts[size_t(r)] = int(s.size());
    displs[size_t(r)] = int(s.begin);
  }
}

}  // namespace

void assemble_in_place(const World& world, uint64_t total, bool with_moment2, TrainingState& full) {
  std::vector<int> counts, displs;
  slice_counts(world, total, counts, displs);
  const auto gather = [&](std::vector<float>& whole) {
    whole.resize(total);
    mpiCheck(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, whole.data(), counts.data(),
                            displs.data(), MPI_FLOAT, world.comm));
  };
  gather(full.params);
  gather(full.moment1);
  if (with_moment2)
    gather(full.moment2);
  else
    full.moment2.clear();
}

void assemble(const World& world, const TrainingState& mine, uint64_t total, bool with_moment2,
              TrainingState& full) {
  std::vector<int> counts, displs;
  slice_counts(world, total, counts, displs);
  const auto gather = [&](const std::vector<float>& part, std::vector<float>& whole) {
    whole.resize(total);
    mpiCheck(MPI_Allgatherv(part.data(), int(part.size()), MPI_FLOAT, whole.data(), counts.data(),
                            displs.data(), MPI_FLOAT, world.comm));
  };
  full.step = mine.step;
  gather(mine.params, full.params);
  gather(mine.moment1, full.moment1);
  if (with_moment2)
    gather(mine.moment2, full.moment2);
  else
    full.moment2.clear();
}

uint64_t state_bytes(const TrainingState& s) {
  return (s.params.size() + s.moment1.size() + s.moment2.size()) * sizeof(float);
}

std::string slab_checksum(const TrainingState& mine) {
  DigestBuilder digest;
  digest.add_all(mine.params);
  digest.add_all(mine.moment1);
  digest.add_all(mine.moment2);
  return digest.finish().hex();
}

std::string elements_text(uint64_t begin, uint64_t end) {
  char text[64];
  std::snprintf(text, sizeof text, "[%llu, %llu)", static_cast<unsigned long long>(begin),
                static_cast<unsigned long long>(end));
  return text;
}

}  // namespace tp
