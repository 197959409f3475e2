#pragma once
// The collectives of the GPU library: NCCL on device buffers, and an MPI collective staged
// through pinned host memory. Only sources of the GPU library include it.
#include <functional>
#include <memory>
#include <string>

#include "common/device_stream.h"
#include "mpi/collective.h"
#include "mpi/comm_deadline.h"
#include "mpi/nccl_roots.h"

namespace tp {

// NCCL over all ranks of `world` on `compute`'s device, ordered after its stream, set up from the
// roots `options` asks for (mpi/nccl_roots.h). A reduction or set-up that waits longer than
// `deadline` allows is aborted (ncclCommAbort, within options.abort_grace_s) after
// `on_timeout(what)` has named the ranks that did not arrive; its answer joins the error.
std::unique_ptr<Collective> make_nccl_collective(
    const World& world, DeviceStream& compute, const NcclOptions& options,
    std::shared_ptr<const CommDeadline> deadline,
    std::function<std::string(const std::string&)> on_timeout);

// Wraps a host-memory collective so it reduces `compute`'s device gradients through pinned host
// buffers.
std::unique_ptr<Collective> stage_collective_through_host(std::unique_ptr<Collective> inner,
                                                          DeviceStream& compute);

}  // namespace tp
