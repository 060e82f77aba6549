// What a run may hold in memory, checked before it allocates: the host's MemAvailable shared
// among the ranks on the host, and on a GPU the device's free memory shared among the ranks
// that use that GPU. A run whose estimate does not fit is refused with the flag to change and
// both numbers, instead of running toward the OOM killer (or cudaMalloc's failure).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace parbench {

struct MemoryBudget {
    std::uint64_t per_rank_bytes = 0;
    std::string source;  // "MemAvailable 22.5 GiB shared by 2 ranks on this host"
};

// MemAvailable from /proc/meminfo; nullopt where it cannot be read (then nothing is refused).
std::optional<std::uint64_t> host_memory_available();
std::optional<MemoryBudget> host_memory_budget(int ranks_on_host);

// `available` bytes of `what` ("MemAvailable", "free memory of GPU 0 (NVIDIA H200)") divided
// among `ranks` (at least 1) that share it; `place` says where they share it ("on this host",
// "on this GPU"). The source reads "free memory of GPU 0 (NVIDIA H200) 139.0 GiB shared by 2
// ranks on this GPU".
MemoryBudget shared_memory_budget(std::uint64_t available, const std::string& what, int ranks,
                                  const std::string& place);

// How many ranks have the same key as `rank` (itself included): the ranks that share one
// memory, when the key names it (host name and device identity).
int ranks_sharing(const std::vector<std::string>& key_by_rank, int rank);

// "12.3 GiB", "512.0 MiB"
std::string memory_text(double bytes);

// One part of an estimate, and the flag that sizes it.
struct MemoryNeed {
    std::string what;  // "send and receive buffers of allreduce at 20 GiB"
    double bytes = 0.0;
    std::string flag;  // "--size 20G"
};

// nullopt when the needs fit the budget; else the refusal, naming the largest need's flag:
//   --size 20G: the run needs 40.0 GiB per rank (send and receive buffers ... 40.0 GiB; samples
//   0.0 GiB), but MemAvailable 22.5 GiB shared by 2 ranks on this host leaves 11.2 GiB; lower --size ...
std::optional<std::string> memory_refusal(const std::vector<MemoryNeed>& needs, const MemoryBudget& budget,
                                          const std::string& advice);

// Needs by where they live: `on_device` in the device's memory, `on_host` in the host's. When
// the device's memory is the host's (no device budget: CPU runs), both come out of the host
// budget together; otherwise each is checked against its own. A budget that is absent (could
// not be read) refuses nothing.
std::optional<std::string> placed_memory_refusal(const std::vector<MemoryNeed>& on_device,
                                                 const std::vector<MemoryNeed>& on_host,
                                                 const std::optional<MemoryBudget>& device,
                                                 const std::optional<MemoryBudget>& host, const std::string& advice);

}  // namespace parbench
