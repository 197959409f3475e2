#pragma once
// The error kinds that decide the exit code (docs/report.md, "Exit codes").
#include <stdexcept>
#include <string>

namespace tp {

inline constexpr int kExitPass = 0;
inline constexpr int kExitFail = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitRuntime = 3;
// Stopped early on SIGTERM/SIGUSR1 after committing a checkpoint: resume with --resume auto.
inline constexpr int kExitPreempted = 4;

// Bad usage or bad input, detected before anything ran. The message names the option, file or
// value.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The environment or the runtime failed (MPI, memory, a device). The message names rank and host.
struct RuntimeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An environment failure that every rank has learned alike (for example: no usable GPU on some
// host). Exit 3 like a RuntimeError, but printed once and without aborting the job.
struct EnvironmentError : RuntimeError {
  using RuntimeError::RuntimeError;
};

}  // namespace tp
