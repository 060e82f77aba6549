// Builds the NCCL backend of a rank: its GPU (one per rank, chosen by the rank's index on
// its host) and an NCCL communicator over all ranks. Part of the CUDA plugin
// (device/cuda_plugin.hpp); no CUDA header here, so the plugin's entry table can name it.
#pragma once

#include <memory>

#include "comm/communicator.hpp"
#include "comm/mpi_session.hpp"
#include "device/cuda_plugin.hpp"
#include "device/device.hpp"

namespace parbench {

// GPUs this process can use (after CUDA_VISIBLE_DEVICES); 0 when there is no driver, no
// device or any other CUDA failure. Never throws.
int cuda_visible_gpu_count() noexcept;
// The same count, with a CUDA failure other than "no device" as its fault. (The core's
// gpu_availability(), device/cuda_plugin.hpp, reaches it through the plugin.)
GpuAvailability cuda_gpu_availability();

struct NcclBackend {
    std::unique_ptr<Device> device;
    std::unique_ptr<Communicator> comm;
};

// Collective over `bootstrap`, an MPI communicator over all ranks on host memory: checks
// that no host runs more ranks than it has GPUs (UsageError naming both numbers, on every
// rank alike), selects GPU local_rank, and creates the NCCL communicator from a unique id
// that rank 0 makes and broadcasts.
NcclBackend make_nccl_backend(const MpiSession& session, Communicator& bootstrap);

}  // namespace parbench
