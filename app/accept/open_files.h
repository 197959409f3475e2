#pragma once
// The open-file limit (RLIMIT_NOFILE, `ulimit -n`) of this process. A rank that talks to every
// peer (an alltoall, the pairwise pass) holds a socket or more per peer on TCP fabrics; at
// thousands of ranks the common default of 1,024 runs out mid-stage with EMFILE, far from where
// the cause is visible (docs/acceptance.md, "Open files").
#include <cstdint>
#include <string>

namespace tp {

struct OpenFileLimit {
  uint64_t soft_before = 0;  // the soft limit as the process started
  uint64_t soft = 0;         // after raising it, where it was raised
  uint64_t hard = 0;
  std::string problem;  // "" unless the limit could not be read or raised
};

// Reads the limit and, where the soft one is below `need` and the hard one allows it, raises the
// soft one to `need` (an unprivileged process may, up to the hard limit).
OpenFileLimit ensure_open_files(uint64_t need);

}  // namespace tp
