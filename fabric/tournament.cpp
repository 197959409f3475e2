#include "fabric/tournament.h"

#include <algorithm>

namespace tp {

std::vector<std::vector<NodePair>> round_robin(int nodes) {
  std::vector<std::vector<NodePair>> rounds;
  if (nodes < 2) return rounds;
  // An odd count plays against a bye (index `nodes`): whoever meets it sits the round out.
  const int seats = nodes % 2 == 0 ? nodes : nodes + 1;
  // Seat 0 stays put; the others rotate one place per round.
  std::vector<int> ring(size_t(seats - 1));
  for (int i = 0; i < seats - 1; ++i) ring[size_t(i)] = i + 1;
  for (int round = 0; round < seats - 1; ++round) {
    std::vector<NodePair> pairs;
    const auto add = [&](int a, int b) {
      if (a < nodes && b < nodes) pairs.emplace_back(std::min(a, b), std::max(a, b));
    };
    add(0, ring[0]);
    for (int i = 1; i < seats / 2; ++i) add(ring[size_t(i)], ring[size_t(seats - 1 - i)]);
    rounds.push_back(std::move(pairs));
    std::rotate(ring.rbegin(), ring.rbegin() + 1, ring.rend());
  }
  return rounds;
}

}  // namespace tp
