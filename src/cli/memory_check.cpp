#include "cli/memory_check.hpp"

#include <algorithm>
#include <cstring>

namespace parbench {

RunMemoryBudgets run_memory_budgets(const Device& device, Communicator& control,
                                    const std::vector<std::string>& hosts_by_rank, int ranks_on_host) {
    RunMemoryBudgets budgets;
    budgets.host = host_memory_budget(ranks_on_host);
    const std::optional<DeviceMemory> memory = device.free_memory();
    // Which ranks share this rank's device memory: every rank's "host|id", gathered whole.
    constexpr std::size_t width = 320;
    std::string key;
    const int rank = control.rank();
    if (static_cast<std::size_t>(rank) < hosts_by_rank.size()) key = hosts_by_rank[static_cast<std::size_t>(rank)];
    key += "|" + (memory ? memory->id : std::string("unknown"));
    std::vector<char> mine(width, '\0');
    std::memcpy(mine.data(), key.data(), std::min(key.size(), width - 1));
    std::vector<char> all(width * static_cast<std::size_t>(control.size()));
    control.allgather(mine.data(), all.data(), width, DType::int8);
    if (!memory || memory->is_host_memory) return budgets;
    std::vector<std::string> keys;
    for (int r = 0; r < control.size(); ++r) keys.emplace_back(all.data() + width * static_cast<std::size_t>(r));
    budgets.device = shared_memory_budget(memory->free_bytes, memory->what, ranks_sharing(keys, rank), "on this GPU");
    return budgets;
}

}  // namespace parbench
