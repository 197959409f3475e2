#pragma once
// Stopping a run early, at the points where every rank can stop alike: Slurm sends SIGTERM before
// it kills a job (or a chosen signal earlier, with --signal=USR1@60), and accept has a time budget
// (accept.time_budget_s). Once the handlers are installed, SIGTERM and SIGUSR1 only raise a flag;
// every rank then agrees at its next stop point (a step boundary, a row or round of the sweep, the
// end of a stage) to stop there (docs/acceptance.md, "Signals and the time budget").
#include <mpi.h>

#include <chrono>
#include <csignal>
#include <stdexcept>
#include <string>

namespace tp {

// A stop that is not a signal: the time budget ran out.
inline constexpr int kStopBudget = 1000;

void install_preemption_handlers();
// "SIGTERM", "SIGUSR1", or "the time budget" for kStopBudget.
const char* signal_name(int signal);

// From `deadline` on, local_stop() says kStopBudget.
void set_stop_deadline(std::chrono::steady_clock::time_point deadline);
// No deadline from here on (signals still stop).
void clear_stop_deadline();
// 0, the signal received, or kStopBudget past the deadline.
int local_stop();
// Whether a stop can be asked for at all (handlers installed or a deadline set): stop points that
// would cost a collective skip it otherwise.
bool stop_points_armed();
// Collective over `comm`: the largest local_stop() of its ranks (so the budget wins over a
// signal). A non-zero answer is remembered: stop_agreed() returns it from then on.
int agreed_stop(MPI_Comm comm);
int stop_agreed();

// Thrown on every rank of a communicator at once, at a stop point where they agreed to stop: the
// stage unwinds alike everywhere, and its caller records it as stopped.
class StageStopped : public std::runtime_error {
 public:
  explicit StageStopped(int stop)
      : std::runtime_error(std::string("stopped: ") + signal_name(stop)), stop_(stop) {}
  int stop() const { return stop_; }

 private:
  int stop_;
};

// A stop point inside a stage (a row of the sweep, a round of the pairwise pass): collective over
// `comm` when stops are armed, nothing otherwise. Throws StageStopped when the ranks agree to stop.
void stop_point(MPI_Comm comm);

}  // namespace tp
