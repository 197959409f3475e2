#pragma once
// The crash report (docs/crash-report.md): a process that receives SIGSEGV, SIGBUS, SIGFPE,
// SIGILL or SIGABRT (an uncaught exception ends in SIGABRT) writes one line naming the rank, the
// host, the subcommand, the signal and its address to stderr, then its stack, and the same
// record as crash-rank<R>.json in the crash folder (the watchdog's), then re-raises the signal so
// the process still ends by it (a launcher reports 128 + the signal's number). Everything the
// handler needs is formatted before any crash, into fixed buffers: inside the handler there is
// no allocation, lock or stdio.
#include <string>

namespace tp {

// Installs the handlers for the five signals, on an alternate stack (a stack overflow still
// reports), and the uncaught-exception hook. Idempotent; call again after a library that installs
// its own handlers (MPI_Init) has run, so trainproof's is the one that reports.
void install_crash_report();

// What the line and the record say about this process. Before MPI knows the rank, the launcher's
// environment gives it (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, SLURM_PROCID; else 0).
void set_crash_subcommand(const std::string& subcommand);
void set_crash_identity(int rank, const std::string& host);
// Where crash-rank<R>.json goes; the folder is created (its last part only) when a crash comes.
void set_crash_folder(const std::string& folder);

// The record's file name for `rank`: crash-rank<R>.json.
std::string crash_record_name(int rank);

// The signal's name ("SIGSEGV"), never its number alone; "another signal" for one outside the
// list.
const char* crash_signal_name(int signal);

}  // namespace tp
