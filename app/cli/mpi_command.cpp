#include "app/cli/mpi_command.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>

#include "app/cli/output_options.h"
#include "common/crash_report.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/log.h"
#include "common/redact.h"
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
  // Open MPI's opal_init installs its own handler on a fatal signal still at its default, and
  // another library (a transport, a PMIx plugin) may replace one later: installing again here
  // keeps trainproof's report, which names the rank, host and frames (docs/crash-report.md).
  install_crash_report();
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
  set_crash_identity(world.rank, world.host);
  return world;
}

// test.crash: the crash report's cases, on one rank (mpi_command.h).
void crash_for_test(const MpiCommand& command, const World& world) {
  if (world.rank != command.crash_rank) return;
  if (command.crash == "null_call") {
    void (*volatile no_function)() = nullptr;
    no_function();
  } else if (command.crash == "uncaught_exception") {
    std::thread([rank = world.rank] {
      throw std::runtime_error("test.crash=uncaught_exception on rank " + std::to_string(rank));
    }).join();
  }
}

// How long the other ranks wait for rank 0 to print an error everyone found before they exit.
constexpr double kErrorLineWait_s = 60;

// Rank 0 prints the line; no rank exits before it has: a launcher ends the whole job when its
// first rank exits, and rank 0 could be killed with its line unprinted. A rank that waited past
// the deadline (rank 0 is elsewhere: the error was not everyone's) prints the line itself.
void print_agreed_error(MPI_Comm comm, const std::string& message) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const std::string text = message_text(message);
  if (rank == 0) {
    std::fprintf(stderr, "trainproof: error: %s\n", text.c_str());
    std::fflush(stderr);
  }
  if (!barrier_within(comm, kErrorLineWait_s) && rank != 0) {
    std::fprintf(stderr, "trainproof: error (rank %d on %s): %s\n", rank, host_name().c_str(),
                 text.c_str());
    std::fflush(stderr);
  }
}

// How long a rank that has finished waits for the others before it leaves anyway (one of them is
// stuck or gone: waiting longer proves nothing more).
constexpr double kLeaveTogetherWait_s = 60;

void leave_together(const MpiCommand& command, const World& world) {
  if (world.rank == command.linger_rank)
    std::this_thread::sleep_for(std::chrono::duration<double>(command.linger_s));
  if (!barrier_within(world.comm, kLeaveTogetherWait_s))
    spdlog::warn("leaving after {} s without every rank: one is stuck or gone",
                 kLeaveTogetherWait_s);
}

// Errors every rank agreed on: printed once, and the job ends with their exit code.
int run_with_agreed_errors(const std::function<int(World&)>& body, World& world) {
  try {
    return body(world);
  } catch (const UsageError& e) {
    print_agreed_error(world.comm, e.what());
    return kExitUsage;
  } catch (const EnvironmentError& e) {
    print_agreed_error(world.comm, e.what());
    return kExitRuntime;
  }
}

// Ranks in the job as its launcher says (mpirun; srun through PMIx or PMI-2); 1 when none does,
// as for a process that a batch script runs by itself.
int launched_ranks() {
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (!size) size = std::getenv("PMI_SIZE");
  if (!size && std::getenv("PMIX_RANK")) size = std::getenv("SLURM_STEP_NUM_TASKS");
  return size ? std::max(1, std::atoi(size)) : 1;
}

bool launched_rank_zero() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* value = std::getenv(name)) return std::string(value) == "0";
  return true;
}

}  // namespace

std::string default_crash_folder(const boost::program_options::variables_map& options) {
  if (options.count("watchdog.dir") && !options["watchdog.dir"].as<std::string>().empty())
    return options["watchdog.dir"].as<std::string>();
  std::error_code ec;
  const std::string report =
      options.count("report") ? options["report"].as<std::string>() : "trainproof-report.json";
  const std::filesystem::path beside = std::filesystem::absolute(report, ec).parent_path();
  return ec ? std::string("trainproof-heartbeats") : (beside / "trainproof-heartbeats").string();
}

std::string pretend_host(int split_hosts, const std::string& host, int rank, int size) {
  if (split_hosts <= 0) return "";
  const int group = int(int64_t(rank) * std::min(split_hosts, size) / size);
  return host + "-vnode" + std::to_string(group);
}

// Only rank 0 carries the job's code out. Past the barrier every rank is done, but a rank that
// exits non-zero first makes a launcher that ends the step on a bad exit (srun -K1) kill the
// others while they tear down, and the step then ends 143, not with the verdict. The others exit
// 0, and rank 0, leaving with a failure, gives them a moment to be gone first.
constexpr double kLastToLeave_s = 0.5;

int exit_code_of(int rank, int ranks, int code) {
  if (rank != 0) return 0;
  if (code != 0 && ranks > 1)
    std::this_thread::sleep_for(std::chrono::duration<double>(kLastToLeave_s));
  return code;
}

int run_mpi_command(const MpiCommand& command, const std::function<int(World&)>& body) {
  if (const int failed = start_mpi(command); failed >= 0) return failed;
  try {
    World world = make_command_world(command);
    crash_for_test(command, world);
    const int code = run_with_agreed_errors(body, world);
    // The result line reaches a launcher's pipe before MPI_Finalize and the library teardowns
    // that follow it, so a crash there still leaves it (docs/crash-report.md).
    std::fflush(stdout);
    leave_together(command, world);
    const int rank = world.rank, ranks = world.size;
    free_world(world);
    MPI_Finalize();
    return exit_code_of(rank, ranks, code);
  } catch (const std::exception& e) {
    // One rank's failure leaves the others blocked in a collective: abort them all.
    std::fprintf(stderr, "trainproof: runtime error on %s: %s\n", identity().c_str(),
                 message_text(e.what()).c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, kExitRuntime);
    return kExitRuntime;
  }
}

int exit_with_usage_error(const std::string& message) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  const bool start = launched_ranks() > 1 && !initialized && !finalized;
  if (start && MPI_Init(nullptr, nullptr) == MPI_SUCCESS) {
    print_agreed_error(MPI_COMM_WORLD, message);
    MPI_Finalize();
  } else if (launched_rank_zero()) {
    std::fprintf(stderr, "trainproof: error: %s\n", message_text(message).c_str());
  }
  return kExitUsage;
}

void agree_outputs_writable(const boost::program_options::variables_map& options,
                            const World& world) {
  std::string problem;
  if (world.rank == 0) try {
      check_output_file("--report", options["report"].as<std::string>());
      side_outputs_from(options, true);
    } catch (const UsageError& e) {
      problem = e.what();
    }
  agree_or_throw<UsageError>(world, problem);
}

}  // namespace tp
