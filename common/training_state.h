#pragma once
// One replica's training state on the host: what a checkpoint stores and a restore loads. It sits
// below both the compute backends (which export and import it) and the checkpoint store (which
// sees host buffers only, never a backend). The data position and every RNG counter are functions
// of `step` (Philox is keyed by the global sample index), so the step is the only cursor.
#include <cstdint>
#include <vector>

namespace tp {

struct TrainingState {
  int64_t step = 0;
  std::vector<float> params;
  std::vector<float> moment1;
  std::vector<float> moment2;  // empty unless the optimizer is Adam
};

}  // namespace tp
