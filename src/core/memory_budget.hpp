// What a run may hold in memory, checked before it allocates: the host's MemAvailable shared
// among the ranks on the host. A run whose estimate does not fit is refused with the flag to
// change and both numbers, instead of running toward the OOM killer.
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

}  // namespace parbench
