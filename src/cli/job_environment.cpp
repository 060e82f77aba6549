#include "cli/job_environment.hpp"

#include <thread>

#include "cli/launcher.hpp"
#include "device/cpu_device.hpp"
#include "device/cpu_kernels.hpp"

namespace parbench {
namespace {

constexpr std::size_t device_name_bytes = 128;

std::vector<std::string> gather_device_names(const Device& device, Communicator& control) {
    std::string name = device.name();
    name.resize(device_name_bytes, '\0');
    std::vector<char> all(device_name_bytes * static_cast<std::size_t>(control.size()));
    control.allgather(name.data(), all.data(), device_name_bytes, DType::uint8);
    std::vector<std::string> names;
    for (int r = 0; r < control.size(); ++r) names.emplace_back(all.data() + device_name_bytes * static_cast<std::size_t>(r));
    return names;
}

}  // namespace

Environment collect_environment(const MpiSession& session, const Device& device, const Communicator& data,
                                Communicator& control) {
    Environment environment;
    // First, before the collective below: a PARBENCH_CPU_KERNELS refused here is refused on every rank alike.
    const CpuKernelChoice kernels = choose_cpu_kernels();
    environment.cpu_kernels = cpu_kernels_name(kernels.kernels);
    environment.cpu_kernels_forced = kernels.forced;
    for (CpuKernels runnable : cpu_kernels_runnable())
        environment.cpu_kernels_runnable.emplace_back(cpu_kernels_name(runnable));
    const BlasLibrary blas = blas_library();
    environment.blas = blas.config;
    environment.blas_core = blas.core;
    environment.world_size = session.world_size();
    environment.launcher = launcher_name();
    environment.hosts_by_rank = session.hosts_by_rank();
    count_ranks_per_host(environment);
    environment.backend = std::string(data.backend());
    environment.device_kind = device.kind();
    environment.devices = gather_device_names(device, control);
    environment.mpi_version = session.library_version();
    environment.cpu = cpu_model_name();
    environment.cpu_cores = std::thread::hardware_concurrency();
    environment.versions = device.versions();
    return environment;
}

}  // namespace parbench
