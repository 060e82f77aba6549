// The budgets a run's memory estimate is checked against before it allocates: the host's
// MemAvailable shared by the ranks on the host, and, when the device is a GPU, its free memory
// (cudaMemGetInfo) shared by the ranks that use that GPU (same host, same GPU UUID); and train's
// estimate, from the theory its ledger is held to.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "core/memory_budget.hpp"
#include "device/device.hpp"
#include "theory/memory.hpp"
#include "train/train_options.hpp"

namespace parbench {

struct RunMemoryBudgets {
    std::optional<MemoryBudget> device;  // absent when the device's memory is the host's
    std::optional<MemoryBudget> host;
};

// Collective over `control` (every rank takes part, whatever its device reports).
RunMemoryBudgets run_memory_budgets(const Device& device, Communicator& control,
                                    const std::vector<std::string>& hosts_by_rank, int ranks_on_host);

// What world rank `world_rank` of a train run will hold, before it allocates anything: the
// buffers theory/memory.hpp counts from the model, the layout and the flags alone (the figure
// the report's memory_predicted_bytes gives and `plan --states parbench` predicts, equal to the
// ledger's for every model family and layout), for the rank's pipeline stage. UsageError (alike
// on every rank) for a micro-batch the engine cannot index.
RankMemory train_rank_memory(const TrainPlan& plan, int world_rank);
// Rank 0's under --check: the serial reference it runs after the run (whose buffers are freed
// by then); nullopt without --check.
std::optional<RankMemory> train_reference_memory(const TrainPlan& plan);

// The refusal of a train run whose rank needs more than its budget: one line naming the flags
// that size the larger part, both numbers and what to change; nullopt when it fits.
// `serial_reference`: `need` is --check's serial reference (train_reference_memory).
std::optional<std::string> train_memory_refusal(const TrainPlan& plan, const RankMemory& need,
                                                const RunMemoryBudgets& budgets, bool serial_reference = false);

}  // namespace parbench
