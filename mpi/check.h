#pragma once
// mpiCheck(call): an MPI error becomes a RuntimeError naming the call, file and line; the handler
// of run_mpi_command (app/cli/mpi_command.cpp) adds the rank and host.
// MPI_COMM_WORLD is set to MPI_ERRORS_RETURN at start-up, so errors reach this check instead of
// aborting inside the library with no context.
#include <mpi.h>

#include <string>

#include "common/errors.h"

namespace tp {

[[noreturn]] inline void throw_mpi_error(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw RuntimeError(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                     std::string(text, length));
}

}  // namespace tp

#define mpiCheck(call)                                                   \
  do {                                                                   \
    const int mpi_check_code_ = (call);                                  \
    if (mpi_check_code_ != MPI_SUCCESS)                                  \
      ::tp::throw_mpi_error(mpi_check_code_, #call, __FILE__, __LINE__); \
  } while (0)
