#pragma once
// One way to run an MPI subcommand (train, prepare-data, and every later one): MPI start-up,
// the world, logging, the exception-to-exit-code mapping (docs/report.md, "Exit codes"), and
// finalisation.
#include <boost/program_options.hpp>
#include <functional>
#include <string>

#include "mpi/world.h"

namespace tp {

struct MpiCommand {
  std::string name;  // "train", for messages
  // MPI_THREAD_FUNNELED unless a thread of the command calls MPI itself.
  int thread_level = 0;
  // Why the command needs thread_level, and what to do when the library cannot give it.
  std::string thread_level_reason;
  std::string log_level = "info";
  // Test only: this rank's pretend host name, from (real host, rank, size); empty keeps the host.
  std::function<std::string(const std::string&, int, int)> host_for_rank;
  // Test only (test.linger_rank, test.linger_s): this rank waits so long after the body before it
  // leaves, the negative control of leaving together.
  int linger_rank = -1;
  double linger_s = 0;
  // Test only (test.crash_rank, test.crash): this rank crashes as the body starts, the crash
  // report's own cases: "null_call" (a call through a null function pointer, SIGSEGV at 0x0),
  // "uncaught_exception" (an exception escapes a thread: std::terminate, SIGABRT).
  int crash_rank = -1;
  std::string crash;
};

// Runs `body` on every rank and returns the process exit code:
// - what `body` returns (0 pass, 1 fail, 4 preempted);
// - 2 for a UsageError and 3 for an EnvironmentError: errors every rank has agreed on
//   (agree_or_throw in mpi/world.h), printed once by rank 0, and the job ends cleanly;
// - any other exception is one rank's alone: it is printed with the rank and host, and
//   MPI_Abort ends the job with 3, so no rank is left waiting in a collective.
// No rank leaves before every rank has finished its body (within a deadline): MPI_Finalize does not
// wait for the others, and a launcher that kills the job when a rank exits non-zero (srun -K,
// Slurm's KillOnBadExit, mpirun) would otherwise kill a slower rank 0 and end the job with 143
// instead of its verdict (docs/report.md, "Exit codes").
int run_mpi_command(const MpiCommand& command, const std::function<int(World&)>& body);

// A usage error found before MPI started (the command line, a scenario file), printed and turned
// into exit 2. Under a launcher of more than one rank, every rank finds it alike; they start MPI so
// that none exits before rank 0 has printed its one line (docs/report.md, "Exit codes").
int exit_with_usage_error(const std::string& message);

// Collective: a --report path rank 0 cannot write is a UsageError on every rank, before anything
// is measured (a run that cannot write its report is wasted); so are --junit and --metrics when
// given (app/cli/output_options.h).
void agree_outputs_writable(const boost::program_options::variables_map& options,
                            const World& world);

// Where a crash record goes before the command knows its heartbeat folder: watchdog.dir, or
// trainproof-heartbeats/ beside --report (the heartbeat folder's own default).
std::string default_crash_folder(const boost::program_options::variables_map& options);

// Test only (test.split_hosts): spreads one machine's ranks evenly over `split_hosts` pretend
// hosts, "HOST-vnodeK"; "" (the real host) when split_hosts is 0.
std::string pretend_host(int split_hosts, const std::string& host, int rank, int size);

}  // namespace tp
