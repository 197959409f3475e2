#include "mpi/world.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "mpi/check.h"

namespace tp {

int World::ranks_on(const std::string& h) const {
  return static_cast<int>(std::count(host_of_rank.begin(), host_of_rank.end(), h));
}

int World::index_on_host() const {
  return static_cast<int>(std::count(host_of_rank.begin(), host_of_rank.begin() + rank, host));
}

World make_world(const std::string& host_override) {
  World w;
  mpiCheck(MPI_Comm_dup(MPI_COMM_WORLD, &w.comm));
  mpiCheck(MPI_Comm_set_errhandler(w.comm, MPI_ERRORS_RETURN));
  mpiCheck(MPI_Comm_rank(w.comm, &w.rank));
  mpiCheck(MPI_Comm_size(w.comm, &w.size));

  MPI_Comm node_comm;
  mpiCheck(MPI_Comm_split_type(w.comm, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &node_comm));
  mpiCheck(MPI_Comm_rank(node_comm, &w.local_rank));
  mpiCheck(MPI_Comm_size(node_comm, &w.local_size));
  mpiCheck(MPI_Comm_free(&node_comm));

  if (host_override.empty()) {
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int length = 0;
    mpiCheck(MPI_Get_processor_name(name, &length));
    w.host.assign(name, length);
  } else {
    w.host = host_override;
  }

  char mine[MPI_MAX_PROCESSOR_NAME] = {};
  std::strncpy(mine, w.host.c_str(), MPI_MAX_PROCESSOR_NAME - 1);
  std::vector<char> all(size_t(MPI_MAX_PROCESSOR_NAME) * w.size);
  mpiCheck(MPI_Allgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME,
                         MPI_CHAR, w.comm));
  for (int r = 0; r < w.size; ++r) {
    w.host_of_rank.emplace_back(&all[size_t(r) * MPI_MAX_PROCESSOR_NAME]);
    if (std::find(w.hosts.begin(), w.hosts.end(), w.host_of_rank.back()) == w.hosts.end())
      w.hosts.push_back(w.host_of_rank.back());
  }
  return w;
}

void free_world(World& world) {
  if (world.comm != MPI_COMM_NULL) MPI_Comm_free(&world.comm);
}

std::vector<double> gather_at_root(const World& world, const std::vector<double>& mine) {
  std::vector<double> all(world.rank == 0 ? mine.size() * world.size : 0);
  mpiCheck(MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(),
                      static_cast<int>(mine.size()), MPI_DOUBLE, 0, world.comm));
  return all;
}

}  // namespace tp

namespace tp {

std::vector<std::string> all_gather_strings(const World& world, const std::string& mine) {
  const int length = static_cast<int>(mine.size());
  std::vector<int> lengths(world.size), offsets(world.size);
  mpiCheck(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, world.comm));
  int total = 0;
  for (int r = 0; r < world.size; ++r) {
    offsets[r] = total;
    total += lengths[r];
  }
  std::vector<char> all(size_t(total) + 1);
  mpiCheck(MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                          MPI_CHAR, world.comm));
  std::vector<std::string> strings;
  for (int r = 0; r < world.size; ++r) strings.emplace_back(&all[offsets[r]], lengths[r]);
  return strings;
}

std::string broadcast_from_root(const World& world, std::string text) {
  int length = int(text.size());
  mpiCheck(MPI_Bcast(&length, 1, MPI_INT, 0, world.comm));
  text.resize(size_t(length));
  mpiCheck(MPI_Bcast(text.data(), length, MPI_CHAR, 0, world.comm));
  return text;
}

std::vector<std::string> gather_strings_at_root(const World& world, const std::string& mine) {
  const int length = static_cast<int>(mine.size());
  std::vector<int> lengths(world.rank == 0 ? world.size : 0);
  mpiCheck(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, world.comm));
  std::vector<int> offsets(lengths.size());
  int total = 0;
  for (size_t r = 0; r < lengths.size(); ++r) {
    offsets[r] = total;
    total += lengths[r];
  }
  std::vector<char> all(size_t(total) + 1);
  mpiCheck(MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                       MPI_CHAR, 0, world.comm));
  std::vector<std::string> strings;
  for (size_t r = 0; r < lengths.size(); ++r) strings.emplace_back(&all[offsets[r]], lengths[r]);
  return strings;
}

std::vector<std::string> gather_strings_on_host(const World& world, const std::string& mine) {
  const int host_index =
      int(std::find(world.hosts.begin(), world.hosts.end(), world.host) - world.hosts.begin());
  World host = world;
  mpiCheck(MPI_Comm_split(world.comm, host_index, world.rank, &host.comm));
  host.rank = world.index_on_host();
  host.size = world.ranks_on(world.host);
  std::vector<std::string> strings = gather_strings_at_root(host, mine);
  MPI_Comm_free(&host.comm);
  return strings;
}

}  // namespace tp

namespace tp {

bool barrier_within(MPI_Comm comm, double seconds) {
  MPI_Request request = MPI_REQUEST_NULL;
  if (MPI_Ibarrier(comm, &request) != MPI_SUCCESS) return false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    int done = 0;
    if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
    if (done) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::string first_problem(const World& world, const std::string& mine) {
  int owner = mine.empty() ? world.size : world.rank;
  mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &owner, 1, MPI_INT, MPI_MIN, world.comm));
  if (owner == world.size) return "";
  int length = world.rank == owner ? static_cast<int>(mine.size()) : 0;
  mpiCheck(MPI_Bcast(&length, 1, MPI_INT, owner, world.comm));
  std::string problem = world.rank == owner ? mine : std::string(size_t(length), ' ');
  mpiCheck(MPI_Bcast(problem.data(), length, MPI_CHAR, owner, world.comm));
  return problem;
}

}  // namespace tp

namespace tp {

std::string first_problem_named(const World& world, const std::string& mine) {
  const std::string named =
      mine.empty() || world.size == 1 || mine.find(world.host) != std::string::npos
          ? mine
          : mine + " (rank " + std::to_string(world.rank) + " on host " + world.host + ")";
  return first_problem(world, named);
}

}  // namespace tp
