#include "comm/backend.hpp"

#include "comm/mpi_communicator.hpp"
#include "core/error.hpp"
#include "device/cpu_device.hpp"

#if defined(PARBENCH_HAVE_CUDA)
#include "comm/nccl_backend.hpp"
#endif

namespace parbench {

BackendChoice parse_backend(const std::string& text) {
    if (text == "auto") return BackendChoice::automatic;
    if (text == "mpi") return BackendChoice::mpi;
    if (text == "nccl") return BackendChoice::nccl;
    throw UsageError("--backend '" + text + "': unknown backend; use auto, mpi or nccl");
}

std::string backend_name(BackendChoice choice) {
    switch (choice) {
        case BackendChoice::automatic: return "auto";
        case BackendChoice::mpi: return "mpi";
        case BackendChoice::nccl: return "nccl";
    }
    return "?";
}

Backend make_backend(BackendChoice choice, const MpiSession& session, Communicator& bootstrap) {
    int local_gpus = 0;
#if defined(PARBENCH_HAVE_CUDA)
    local_gpus = visible_gpu_count();
#endif
    int fewest_gpus = 0;
    bootstrap.allreduce(&local_gpus, &fewest_gpus, 1, DType::int32, ReduceOp::min);
    const bool use_nccl = choice == BackendChoice::nccl || (choice == BackendChoice::automatic && fewest_gpus > 0);
    if (!use_nccl) return Backend{std::make_unique<CpuDevice>(), MpiCommunicator::world()};
#if defined(PARBENCH_HAVE_CUDA)
    if (fewest_gpus == 0)
        throw UsageError("--backend nccl: at least one rank sees no GPU (check CUDA_VISIBLE_DEVICES and the "
                         "driver); use --backend mpi to measure on host memory");
    NcclBackend nccl = make_nccl_backend(session, bootstrap);
    return Backend{std::move(nccl.device), std::move(nccl.comm)};
#else
    (void)session;
    throw UsageError("--backend nccl: this parbench was built without CUDA; rebuild with the CUDA toolkit and "
                     "NCCL present (PARBENCH_CUDA=ON) or use --backend mpi");
#endif
}

}  // namespace parbench
