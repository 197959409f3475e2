#pragma once
// The pairwise pass's schedule (docs/sweep.md, "Pairwise"): every pair of nodes meets exactly
// once, and the pairs of a round are disjoint, so they are measured at the same time without
// sharing a node. The circle method: n - 1 rounds for even n; for odd n a bye makes it n rounds,
// and one node sits out each round.
#include <utility>
#include <vector>

namespace tp {

using NodePair = std::pair<int, int>;  // (lower index, higher index)

// Rounds of disjoint pairs over nodes 0..nodes-1; empty for fewer than 2 nodes.
std::vector<std::vector<NodePair>> round_robin(int nodes);

}  // namespace tp
