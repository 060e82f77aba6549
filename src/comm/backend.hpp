// Chooses and builds the device + communicator pair a run measures on: MPI over host
// memory, or NCCL over GPU memory (one GPU per rank) when built with CUDA.
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.hpp"
#include "comm/mpi_session.hpp"
#include "comm/nccl_log_capture.hpp"
#include "device/device.hpp"

namespace parbench {

enum class BackendChoice { automatic, mpi, nccl };

struct Backend {
    std::unique_ptr<Device> device;
    std::unique_ptr<Communicator> comm;
    std::unique_ptr<NcclLogCapture> nccl_log;  // NCCL's log when asked for (NCCL backend only)
};

// "auto", "mpi" or "nccl"; UsageError naming --backend otherwise.
BackendChoice parse_backend(const std::string& text);
// auto prefers NCCL when this build has CUDA and every rank sees a GPU; a rank's answer is
// agreed over `bootstrap` so that all ranks pick the same backend. auto refuses (UsageError,
// every rank alike) where a rank's host has an NVIDIA driver but its GPUs cannot be used (the
// CUDA plugin did not load, CUDA failed), rather than measure the CPU in their place. `pages`:
// what the MPI backend's host buffers ask for; NCCL's are GPU memory, which it does not apply to.
// `nccl_log`: what of NCCL's own log to capture before NCCL starts (comm/nccl_log_capture.hpp).
Backend make_backend(BackendChoice choice, const MpiSession& session, Communicator& bootstrap, BufferPages pages,
                     NcclLogLevel nccl_log = NcclLogLevel::none);

}  // namespace parbench
