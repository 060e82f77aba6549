#include "comm/backend.hpp"

#include <cstdint>
#include <optional>

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

namespace {

// The lowest rank whose GPUs are at fault, and its reason ("rank R: why" among several), on
// every rank alike, so that all of them refuse together; nullopt when no rank's are. One
// allreduce when none is.
std::optional<std::string> first_gpu_fault(Communicator& bootstrap, const std::string& local_fault) {
    const int mine = local_fault.empty() ? bootstrap.size() : bootstrap.rank();
    int first = 0;
    bootstrap.allreduce(&mine, &first, 1, DType::int32, ReduceOp::min);
    if (first == bootstrap.size()) return std::nullopt;
    std::uint64_t length = local_fault.size();
    bootstrap.broadcast(&length, &length, 1, DType::uint64, first);
    std::string reason = local_fault;
    reason.resize(static_cast<std::size_t>(length));
    bootstrap.broadcast(reason.data(), reason.data(), reason.size(), DType::uint8, first);
    return bootstrap.size() > 1 ? "rank " + std::to_string(first) + ": " + reason : reason;
}

}  // namespace

Backend make_backend(BackendChoice choice, const MpiSession& session, Communicator& bootstrap, BufferPages pages,
                     NcclLogLevel nccl_log) {
    // --backend mpi needs no GPU count: the CUDA plugin stays unloaded, and so do the CUDA
    // libraries (device/cuda_plugin.hpp). Every rank was given the same choice.
    const GpuAvailability local = choice == BackendChoice::mpi ? GpuAvailability{} : gpu_availability();
    int fewest_gpus = 0;
    bootstrap.allreduce(&local.count, &fewest_gpus, 1, DType::int32, ReduceOp::min);
    // auto never trades a GPU it could not use for the CPU without a word: a GPU run that
    // quietly measured host memory would be reported as the wrong thing.
    if (choice == BackendChoice::automatic)
        if (const auto fault = first_gpu_fault(bootstrap, local.fault))
            throw UsageError("--backend auto: this host has an NVIDIA driver, but its GPUs cannot be used (" + *fault +
                             "); fix that to measure on the GPUs, or give --backend mpi to measure on the CPU");
    const bool use_nccl = choice == BackendChoice::nccl || (choice == BackendChoice::automatic && fewest_gpus > 0);
    if (!use_nccl) return Backend{std::make_unique<CpuDevice>(pages), MpiCommunicator::world(), nullptr};
    const CudaPlugin& plugin = cuda_plugin();
    if (!plugin.built)
        throw UsageError("--backend nccl: this parbench was built without CUDA; rebuild with the CUDA toolkit and "
                         "NCCL present (PARBENCH_CUDA=ON) or use --backend mpi");
    if (fewest_gpus == 0) {
        const std::string why = !local.fault.empty()       ? local.fault
                                : plugin.entries == nullptr ? plugin.unavailable_reason
                                : local.count == 0          ? std::string("no NVIDIA driver or no device here; check "
                                                                          "CUDA_VISIBLE_DEVICES and the driver")
                                                            : std::string("another rank's host has none; check "
                                                                          "CUDA_VISIBLE_DEVICES and the driver there");
        throw UsageError("--backend nccl: at least one rank sees no GPU (" + why +
                         "); use --backend mpi to measure on host memory");
    }
    auto log = nccl_log == NcclLogLevel::none ? nullptr : std::make_unique<NcclLogCapture>(nccl_log);
    NcclBackend nccl = plugin.entries->make_nccl_backend(session, bootstrap);
    return Backend{std::move(nccl.device), std::move(nccl.comm), std::move(log)};
}

}  // namespace parbench
