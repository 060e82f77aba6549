// The budgets a run's memory estimate is checked against before it allocates: the host's
// MemAvailable shared by the ranks on the host, and, when the device is a GPU, its free memory
// (cudaMemGetInfo) shared by the ranks that use that GPU (same host, same GPU UUID).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "core/memory_budget.hpp"
#include "device/device.hpp"

namespace parbench {

struct RunMemoryBudgets {
    std::optional<MemoryBudget> device;  // absent when the device's memory is the host's
    std::optional<MemoryBudget> host;
};

// Collective over `control` (every rank takes part, whatever its device reports).
RunMemoryBudgets run_memory_budgets(const Device& device, Communicator& control,
                                    const std::vector<std::string>& hosts_by_rank, int ranks_on_host);

}  // namespace parbench
