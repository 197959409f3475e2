#pragma once

namespace tp {

// Where a buffer lives. A collective states which kind it can reduce; a compute backend states
// which kind its gradients are in. The step loop never dereferences either.
enum class MemoryKind { host, device };

}  // namespace tp
