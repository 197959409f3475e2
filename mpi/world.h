#pragma once
// Who this process is: rank, local rank, host and node, gathered once at start-up.
#include <mpi.h>

#include <string>
#include <vector>

namespace tp {

struct World {
  MPI_Comm comm = MPI_COMM_NULL;  // a private duplicate of MPI_COMM_WORLD
  int rank = 0;
  int size = 1;
  int local_rank = 0;  // rank within the shared-memory node (MPI_COMM_TYPE_SHARED)
  int local_size = 1;
  std::string host;
  std::vector<std::string> host_of_rank;  // indexed by rank
  std::vector<std::string> hosts;         // distinct, in order of first rank

  int ranks_on(const std::string& h) const;
  // This rank's place among the ranks of its host, by host name (0 for the host's first rank).
  // Unlike local_rank it follows the host names, pretend hosts included.
  int index_on_host() const;
};

// `host_override`, when non-empty, replaces this rank's host name before it is gathered. Tests use
// it to spread one machine's ranks over pretend nodes.
World make_world(const std::string& host_override);
void free_world(World& world);

// Gathers one fixed-size block of doubles per rank at rank 0 (rank-major); empty elsewhere.
std::vector<double> gather_at_root(const World& world, const std::vector<double>& mine);

}  // namespace tp

namespace tp {
// Every rank receives every rank's string, indexed by rank.
std::vector<std::string> all_gather_strings(const World& world, const std::string& mine);
// Rank 0's `text` on every rank.
std::string broadcast_from_root(const World& world, std::string text);
// Gathers one string per rank at rank 0 (indexed by rank); empty elsewhere.
std::vector<std::string> gather_strings_at_root(const World& world, const std::string& mine);
// Gathers one string per rank of this host (by host name, pretend hosts included) at the host's
// first rank, in rank order; empty elsewhere. Collective over the world.
std::vector<std::string> gather_strings_on_host(const World& world, const std::string& mine);
}  // namespace tp

namespace tp {
// A barrier that gives up after `seconds`: true when every rank of `comm` arrived in time.
bool barrier_within(MPI_Comm comm, double seconds);

// Every rank learns the problem reported by the lowest rank that has one ("" when none has). Used
// so that a check failing on one host stops every rank alike, with one message.
std::string first_problem(const World& world, const std::string& mine);

// first_problem, with the place named: in a world of more than one rank, a problem whose text does
// not already name its host gets " (rank R on host H)" of the rank that had it.
std::string first_problem_named(const World& world, const std::string& mine);

// "Check locally, agree across ranks, throw": every rank throws the same `Error` (UsageError,
// EnvironmentError) carrying the first rank's problem, or none throws. Only errors agreed this
// way end a run with a clean exit code; see app/cli/mpi_command.h.
template <class Error>
void agree_or_throw(const World& world, const std::string& mine) {
  if (std::string first = first_problem_named(world, mine); !first.empty()) throw Error(first);
}
}  // namespace tp
