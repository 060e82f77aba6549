#include "cli/job_environment.hpp"

#include <thread>

#include "cli/launcher.hpp"
#include "core/error.hpp"
#include "device/cpu_device.hpp"
#include "device/cpu_kernels.hpp"

namespace parbench {
namespace {

constexpr std::size_t text_bytes = 128;

// Every rank's `text` (up to 127 bytes), in rank order. Collective over `control`.
std::vector<std::string> gather_texts(std::string text, Communicator& control) {
    text.resize(text_bytes, '\0');
    text.back() = '\0';
    std::vector<char> all(text_bytes * static_cast<std::size_t>(control.size()));
    control.allgather(text.data(), all.data(), text_bytes, DType::uint8);
    std::vector<std::string> texts;
    for (int r = 0; r < control.size(); ++r) texts.emplace_back(all.data() + text_bytes * static_cast<std::size_t>(r));
    return texts;
}

// Every rank's read-back of its buffers' pages (device/host_pages.hpp). Ranks given different
// --buffer-pages are refused, every rank alike: their figures would mix two page policies.
BufferPagesRecord gather_buffer_pages(const Device& device, Communicator& control) {
    const std::optional<PageReadBack> mine = device.read_back_pages();
    const ThpSetting thp = mine ? mine->thp : read_thp_setting();
    BufferPagesRecord record;
    record.thp_enabled_by_rank = gather_texts(thp.enabled, control);
    record.thp_defrag_by_rank = gather_texts(thp.defrag, control);
    // requested (0 normal, 1 huge, 2 none: GPU memory), probe bytes, capacity, huge bytes + 1 (0: unreadable)
    constexpr std::size_t fields = 4;
    const std::uint64_t figures[fields] = {
        !mine ? 2u : mine->requested == BufferPages::huge ? 1u : 0u, mine ? mine->probe_bytes : 0,
        mine ? mine->probe_huge_capacity : 0, mine && mine->probe_huge_bytes ? *mine->probe_huge_bytes + 1 : 0};
    std::vector<std::uint64_t> all(fields * static_cast<std::size_t>(control.size()));
    control.allgather(figures, all.data(), fields, DType::uint64);
    const auto policy = [](std::uint64_t code) {
        return code == 2 ? std::string("GPU memory") : buffer_pages_name(static_cast<BufferPages>(code));
    };
    for (int r = 0; r < control.size(); ++r) {
        const std::uint64_t* rank = all.data() + fields * static_cast<std::size_t>(r);
        if (rank[0] != all[0])
            throw UsageError("--buffer-pages differs between ranks (rank 0 " + policy(all[0]) + ", rank " +
                             std::to_string(r) + " " + policy(rank[0]) +
                             "); give every rank the same, so that the figures are of one page policy");
        if (rank[0] == 2) continue;
        record.probe_bytes = rank[1];
        record.probe_huge_capacity_by_rank.push_back(rank[2]);
        record.probe_huge_bytes_by_rank.push_back(rank[3] == 0 ? std::nullopt : std::optional(rank[3] - 1));
    }
    if (all[0] != 2) record.requested = policy(all[0]);
    return record;
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
    environment.devices = gather_texts(device.name(), control);
    environment.mpi_version = session.library_version();
    environment.cpu = cpu_model_name();
    environment.cpu_cores = std::thread::hardware_concurrency();
    environment.versions = device.versions();
    environment.buffer_pages = gather_buffer_pages(device, control);
    return environment;
}

}  // namespace parbench
