#include "comm/nccl_backend.hpp"

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "comm/mpi_communicator.hpp"
#include "comm/nccl_communicator.hpp"
#include "core/error.hpp"
#include "device/cuda_check.hpp"
#include "device/cuda_device.hpp"

namespace parbench {
namespace {

// Every rank learns every rank's (ranks on its host, GPUs it sees), so all of them reach
// the same verdict and throw the same error: none is left waiting in NCCL's initialisation.
void check_one_gpu_per_rank(const MpiSession& session, Communicator& bootstrap, int gpus) {
    const int mine[2] = {session.local_size(), gpus};
    std::vector<int> all(2 * static_cast<std::size_t>(bootstrap.size()));
    bootstrap.allgather(mine, all.data(), 2, DType::int32);
    for (int rank = 0; rank < bootstrap.size(); ++rank) {
        const int ranks_on_host = all[2 * static_cast<std::size_t>(rank)];
        const int gpus_on_host = all[2 * static_cast<std::size_t>(rank) + 1];
        if (ranks_on_host <= gpus_on_host) continue;
        const std::string host = static_cast<std::size_t>(rank) < session.hosts_by_rank().size()
                                     ? session.hosts_by_rank()[static_cast<std::size_t>(rank)]
                                     : "rank " + std::to_string(rank) + "'s host";
        throw UsageError("--backend nccl: host " + host + " runs " + std::to_string(ranks_on_host) +
                         " ranks but sees " + std::to_string(gpus_on_host) +
                         " GPUs; the NCCL backend needs one GPU per rank: start at most " +
                         std::to_string(gpus_on_host) +
                         " ranks per host (mpirun --map-by ppr:N:node) or check CUDA_VISIBLE_DEVICES");
    }
}

std::unique_ptr<HostComm> duplicate_host_comm(Communicator& bootstrap) {
    const auto* mpi = dynamic_cast<const MpiCommunicator*>(&bootstrap);
    if (mpi == nullptr) throw std::logic_error("make_nccl_backend: the bootstrap communicator must be an MPI one");
    MPI_Comm copy = MPI_COMM_NULL;
    check_mpi(MPI_Comm_dup(mpi->handle(), &copy), "MPI_Comm_dup");
    return std::make_unique<HostComm>(copy);
}

}  // namespace

int cuda_visible_gpu_count() noexcept {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        (void)cudaGetLastError();  // no driver or no device: not an error of anything later
        return 0;
    }
    return count;
}

GpuAvailability cuda_gpu_availability() {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status == cudaSuccess) return {count, ""};
    (void)cudaGetLastError();  // not sticky: later calls must not see it
    // No device, or none left visible by CUDA_VISIBLE_DEVICES: an answer. Anything else (a
    // driver older than this runtime, a device node that cannot be opened) is a fault.
    if (status == cudaErrorNoDevice) return {0, ""};
    return {0, std::string("cudaGetDeviceCount: ") + cudaGetErrorName(status) + ": " + cudaGetErrorString(status)};
}

NcclBackend make_nccl_backend(const MpiSession& session, Communicator& bootstrap) {
    check_one_gpu_per_rank(session, bootstrap, cuda_visible_gpu_count());
    auto device = std::make_unique<CudaDevice>(session.local_rank());

    ncclUniqueId id{};
    if (bootstrap.rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    bootstrap.broadcast(&id, &id, sizeof id, DType::uint8, 0);
    ncclComm_t raw = nullptr;
    // The device selected by CudaDevice above is the one NCCL binds this rank to.
    check_nccl(ncclCommInitRank(&raw, bootstrap.size(), id, bootstrap.rank()), "ncclCommInitRank");
    auto comm = std::make_unique<NcclCommunicator>(std::make_shared<NcclComm>(raw), device->shared_stream(),
                                                   duplicate_host_comm(bootstrap));
    device->set_wait_check(comm->async_error_check());
    return NcclBackend{std::move(device), std::move(comm)};
}

}  // namespace parbench
