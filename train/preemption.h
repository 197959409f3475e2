#pragma once
// Preemption: Slurm sends SIGTERM before it kills a job (or a chosen signal earlier, with
// --signal=USR1@60). With checkpoints on, SIGTERM and SIGUSR1 only raise a flag; every rank then
// agrees at the next step boundary to checkpoint and stop, so a --requeue job resumes there.
#include <csignal>

namespace tp {

void install_preemption_handlers();
// The signal received since installation, or 0.
int preemption_signal();
const char* signal_name(int signal);

}  // namespace tp
