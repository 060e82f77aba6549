#include "comm/backend.hpp"

#include "comm/mpi_communicator.hpp"
#include "comm/nccl_backend.hpp"
#include "core/error.hpp"
#include "device/cpu_device.hpp"
#include "device/cuda_plugin.hpp"

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

Backend make_backend(BackendChoice choice, const MpiSession& session, Communicator& bootstrap, BufferPages pages,
                     NcclLogLevel nccl_log) {
    // --backend mpi needs no GPU count: the CUDA plugin stays unloaded, and so do the CUDA
    // libraries (device/cuda_plugin.hpp). Every rank was given the same choice.
    const int local_gpus = choice == BackendChoice::mpi ? 0 : visible_gpu_count();
    int fewest_gpus = 0;
    bootstrap.allreduce(&local_gpus, &fewest_gpus, 1, DType::int32, ReduceOp::min);
    const bool use_nccl = choice == BackendChoice::nccl || (choice == BackendChoice::automatic && fewest_gpus > 0);
    if (!use_nccl) return Backend{std::make_unique<CpuDevice>(pages), MpiCommunicator::world(), nullptr};
    const CudaPlugin& plugin = cuda_plugin();
    if (!plugin.built)
        throw UsageError("--backend nccl: this parbench was built without CUDA; rebuild with the CUDA toolkit and "
                         "NCCL present (PARBENCH_CUDA=ON) or use --backend mpi");
    if (fewest_gpus == 0)
        throw UsageError("--backend nccl: at least one rank sees no GPU (" +
                         (plugin.entries == nullptr ? plugin.unavailable_reason
                                                    : std::string("check CUDA_VISIBLE_DEVICES and the driver")) +
                         "); use --backend mpi to measure on host memory");
    auto log = nccl_log == NcclLogLevel::none ? nullptr : std::make_unique<NcclLogCapture>(nccl_log);
    NcclBackend nccl = plugin.entries->make_nccl_backend(session, bootstrap);
    return Backend{std::move(nccl.device), std::move(nccl.comm), std::move(log)};
}

}  // namespace parbench
