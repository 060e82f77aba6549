#include "core/memory_budget.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace parbench {

std::optional<std::uint64_t> host_memory_available() {
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    std::uint64_t kib = 0;
    std::string unit;
    while (meminfo >> key >> kib >> unit)
        if (key == "MemAvailable:") return kib * 1024;
    return std::nullopt;
}

std::optional<MemoryBudget> host_memory_budget(int ranks_on_host) {
    const auto available = host_memory_available();
    if (!available) return std::nullopt;
    return shared_memory_budget(*available, "MemAvailable", ranks_on_host, "on this host");
}

MemoryBudget shared_memory_budget(std::uint64_t available, const std::string& what, int ranks,
                                  const std::string& place) {
    ranks = std::max(ranks, 1);
    MemoryBudget budget;
    budget.per_rank_bytes = available / static_cast<std::uint64_t>(ranks);
    budget.source = what + " " + memory_text(static_cast<double>(available)) +
                    (ranks > 1 ? " shared by " + std::to_string(ranks) + " ranks " + place : " " + place);
    return budget;
}

int ranks_sharing(const std::vector<std::string>& key_by_rank, int rank) {
    if (rank < 0 || static_cast<std::size_t>(rank) >= key_by_rank.size()) return 1;
    const std::string& mine = key_by_rank[static_cast<std::size_t>(rank)];
    return static_cast<int>(std::count(key_by_rank.begin(), key_by_rank.end(), mine));
}

std::string memory_text(double bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int unit = 0;
    while (bytes >= 1024.0 && unit < 5) {
        bytes /= 1024.0;
        ++unit;
    }
    char text[48];
    std::snprintf(text, sizeof text, "%.1f %s", bytes, units[unit]);
    return text;
}

std::optional<std::string> memory_refusal(const std::vector<MemoryNeed>& needs, const MemoryBudget& budget,
                                          const std::string& advice) {
    double total = 0.0;
    for (const MemoryNeed& need : needs) total += need.bytes;
    if (total <= static_cast<double>(budget.per_rank_bytes) || needs.empty()) return std::nullopt;
    const auto largest = std::max_element(needs.begin(), needs.end(),
                                          [](const MemoryNeed& a, const MemoryNeed& b) { return a.bytes < b.bytes; });
    std::ostringstream text;
    text << largest->flag << ": the run needs " << memory_text(total) << " per rank (";
    for (std::size_t i = 0; i < needs.size(); ++i)
        text << (i ? "; " : "") << needs[i].what << " " << memory_text(needs[i].bytes);
    text << "), but " << budget.source << " leaves " << memory_text(static_cast<double>(budget.per_rank_bytes))
         << " per rank; " << advice;
    return text.str();
}

}  // namespace parbench

namespace parbench {

std::optional<std::string> placed_memory_refusal(const std::vector<MemoryNeed>& on_device,
                                                 const std::vector<MemoryNeed>& on_host,
                                                 const std::optional<MemoryBudget>& device,
                                                 const std::optional<MemoryBudget>& host, const std::string& advice) {
    if (!device) {
        if (!host) return std::nullopt;
        std::vector<MemoryNeed> together = on_device;
        together.insert(together.end(), on_host.begin(), on_host.end());
        return memory_refusal(together, *host, advice);
    }
    if (auto refusal = memory_refusal(on_device, *device, advice)) return refusal;
    return host ? memory_refusal(on_host, *host, advice) : std::nullopt;
}

}  // namespace parbench
