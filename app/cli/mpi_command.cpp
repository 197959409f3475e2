#include "app/cli/mpi_command.h"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <exception>

#include "common/errors.h"
#include "common/files.h"
#include "common/log.h"
#include "common/sysinfo.h"

namespace tp {
namespace {

// Returns an exit code when MPI cannot start as the command needs, or -1 when it is up.
int start_mpi(const MpiCommand& command) {
  const int required = command.thread_level == 0 ? MPI_THREAD_FUNNELED : command.thread_level;
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, required, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "trainproof: MPI_Init_thread failed on host %s\n", host_name().c_str());
    return kExitRuntime;
  }
  if (provided < required) {
    std::fprintf(stderr,
                 "trainproof: error: %s; the MPI library on host %s provides level %d only\n",
                 command.thread_level_reason.c_str(), host_name().c_str(), provided);
    MPI_Finalize();
    return kExitRuntime;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  return -1;
}

World make_command_world(const MpiCommand& command) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::string host =
      command.host_for_rank ? command.host_for_rank(host_name(), rank, size) : std::string();
  World world = make_world(host);
  init_logging(world.rank, world.host, command.log_level);
  set_identity(world.rank, world.host);
  return world;
}

// Errors every rank agreed on: printed once, and the job ends with their exit code.
int run_with_agreed_errors(const std::function<int(World&)>& body, World& world) {
  try {
    return body(world);
  } catch (const UsageError& e) {
    if (world.rank == 0) std::fprintf(stderr, "trainproof: error: %s\n", e.what());
    return kExitUsage;
  } catch (const EnvironmentError& e) {
    if (world.rank == 0) std::fprintf(stderr, "trainproof: error: %s\n", e.what());
    return kExitRuntime;
  }
}

}  // namespace

std::string pretend_host(int split_hosts, const std::string& host, int rank, int size) {
  if (split_hosts <= 0) return "";
  const int group = int(int64_t(rank) * std::min(split_hosts, size) / size);
  return host + "-vnode" + std::to_string(group);
}

int run_mpi_command(const MpiCommand& command, const std::function<int(World&)>& body) {
  if (const int failed = start_mpi(command); failed >= 0) return failed;
  try {
    World world = make_command_world(command);
    const int code = run_with_agreed_errors(body, world);
    free_world(world);
    MPI_Finalize();
    return code;
  } catch (const std::exception& e) {
    // One rank's failure leaves the others blocked in a collective: abort them all.
    std::fprintf(stderr, "trainproof: runtime error on %s: %s\n", identity().c_str(), e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, kExitRuntime);
    return kExitRuntime;
  }
}

void agree_report_path_writable(const std::string& path, const World& world) {
  std::string problem;
  if (world.rank == 0) try {
      check_output_file("--report", path);
    } catch (const UsageError& e) {
      problem = e.what();
    }
  agree_or_throw<UsageError>(world, problem);
}

}  // namespace tp
