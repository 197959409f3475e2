#include "train/preemption.h"

namespace tp {
namespace {

volatile std::sig_atomic_t received = 0;

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
}

int preemption_signal() {
  return received;
}

const char* signal_name(int signal) {
  switch (signal) {
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    default:
      return "signal";
  }
}

}  // namespace tp
