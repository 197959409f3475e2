#pragma once
// Tests that need MPI run as one process, on MPI_COMM_SELF: a manifest-damage case then costs a
// unit test, not an mpirun. MPI starts on first use only, so a death test's child (which re-runs
// this binary for one test) starts MPI only when that test needs it.
#include <string>

#include "mpi/world.h"

namespace tp::test {

// A one-rank world on MPI_COMM_SELF, on a pretend host; MPI_THREAD_MULTIPLE, as the async
// checkpoint writer needs.
World one_rank_world(const std::string& host = "unit-host");

// A fresh, empty folder for the test `name`, unique to this process and shared with the children
// its death tests start (they see their parent's folder, left as the parent made it).
std::string fresh_dir(const std::string& name);
// Minor page faults of this process so far: memory touched for the first time. The page-fault
// tests compare it around a second checkpoint save.
long minor_page_faults();

// Removes every folder fresh_dir made; main() calls it once the tests have run.
void remove_test_folders();

}  // namespace tp::test
