#include "train/preemption.h"

#include <atomic>

#include "mpi/check.h"

namespace tp {
namespace {

volatile std::sig_atomic_t received = 0;
bool installed = false;
std::atomic<bool> has_deadline{false};
std::chrono::steady_clock::time_point stop_deadline;
int agreed = 0;

extern "C" void remember_signal(int signal) {
  received = signal;
}

}  // namespace

void install_preemption_handlers() {
  struct sigaction action {};
  action.sa_handler = remember_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGUSR1, &action, nullptr);
  installed = true;
}

const char* signal_name(int signal) {
  switch (signal) {
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    case kStopBudget:
      return "the time budget";
    default:
      return "signal";
  }
}

void set_stop_deadline(std::chrono::steady_clock::time_point deadline) {
  stop_deadline = deadline;
  has_deadline = true;
}

void clear_stop_deadline() {
  has_deadline = false;
}

int local_stop() {
  if (has_deadline && std::chrono::steady_clock::now() >= stop_deadline) return kStopBudget;
  return received;
}

bool stop_points_armed() {
  return installed || has_deadline;
}

int agreed_stop(MPI_Comm comm) {
  int stop = local_stop();
  mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &stop, 1, MPI_INT, MPI_MAX, comm));
  if (stop != 0 && agreed == 0) agreed = stop;
  return stop;
}

int stop_agreed() {
  return agreed;
}

void stop_point(MPI_Comm comm) {
  if (!stop_points_armed()) return;
  if (const int stop = agreed_stop(comm); stop != 0) throw StageStopped(stop);
}

}  // namespace tp
