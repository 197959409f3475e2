#pragma once
// How a checkpoint splits the state between ranks when each writes a distinct part (ZeRO-1 style
// `checkpoint.shard_optimizer`, and the hyperslabs of the shared file). Every tensor of the state
// has the same element count, so one element range per rank slices all of them alike.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/training_state.h"
#include "mpi/world.h"

namespace tp {

struct Slice {
  uint64_t begin = 0;
  uint64_t end = 0;  // exclusive
  uint64_t size() const { return end - begin; }
};

// Contiguous and balanced: the first (n % ranks) ranks hold one element more.
Slice rank_slice(uint64_t n, int rank, int ranks);

// This rank's slice of every tensor (moment2 stays empty when the state has none).
TrainingState cut(const TrainingState& full, Slice slice);

// Collective: rebuilds the full tensors of `total` elements from every rank's slice. `mine` holds
// this rank's rank_slice(total, ...) of each tensor; `with_moment2` says whether the state has one.
void assemble(const World& world, const TrainingState& mine, uint64_t total, bool with_moment2,
              TrainingState& full);

// Bytes of every tensor of a state (or of a slice of it).
// Collective: as assemble, when every rank's slice already lies at its own elements of `full`
// (sized to `total`): the other slices are gathered around it, with no copy of the state.
void assemble_in_place(const World& world, uint64_t total, bool with_moment2, TrainingState& full);

uint64_t state_bytes(const TrainingState& state);
// One checksum over a slab of every tensor, in dataset order.
std::string slab_checksum(const TrainingState& mine);
// "[begin, end)", for messages.
std::string elements_text(uint64_t begin, uint64_t end);

}  // namespace tp
