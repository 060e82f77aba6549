#include "cli/memory_check.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "core/error.hpp"

#include "train/mesh.hpp"
#include "train/train_run.hpp"

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

namespace {

// "--model gpt-small (124M parameters)"
std::string model_flag(const TrainPlan& plan) {
    const double parameters =
        static_cast<double>(model_parameter_layout(plan.layout.model, plan.layout.seq_len).total_numel());
    const char* scale = parameters >= 1e12 ? "T" : parameters >= 1e9 ? "B" : parameters >= 1e6 ? "M" : "K";
    const double unit = parameters >= 1e12 ? 1e12 : parameters >= 1e9 ? 1e9 : parameters >= 1e6 ? 1e6 : 1e3;
    std::ostringstream text;
    text << "--model " << plan.options.model << " (" << std::setprecision(3) << parameters / unit << scale
         << " parameters)";
    return text.str();
}

// The flags that size a micro-batch's activations: the global batch, and the sequence when given.
std::string batch_flags(const TrainPlan& plan) {
    std::string flags = "--global-batch " + std::to_string(plan.layout.global_batch);
    if (plan.options.seq) flags += " --seq " + std::to_string(*plan.options.seq);
    return flags;
}

// The engine indexes a micro-batch's rows (its tokens, or the MLP's samples) by int
// (train/matmuls.hpp), as the memory theory's matmul shapes do.
void check_microbatch_rows(const TrainPlan& plan, const Layout& l, const std::string& what) {
    const double rows = static_cast<double>(l.microbatch_size) * (l.model.has_sequence() ? l.seq_len : 1);
    if (rows > INT_MAX)
        throw UsageError(batch_flags(plan) + ": " + what + " a micro-batch of " +
                         std::to_string(static_cast<long long>(rows)) + " rows (samples x tokens), beyond the engine's " +
                         std::to_string(INT_MAX) + "; use a smaller batch or sequence, more --microbatches, or more ranks");
}

}  // namespace

RankMemory train_rank_memory(const TrainPlan& plan, int world_rank) {
    check_microbatch_rows(plan, plan.layout, "each rank would run");
    return engine_rank_memory(plan.layout, mesh_coordinates(mesh_shape(plan.layout), world_rank).pp);
}

std::optional<RankMemory> train_reference_memory(const TrainPlan& plan) {
    if (!plan.options.check) return std::nullopt;
    const TrainPlan reference = serial_reference_plan(plan, plan.layout.dp);
    check_microbatch_rows(plan, reference.layout, "--check's serial reference (the global batch on one rank) would run");
    return engine_rank_memory(reference.layout, 0);
}

std::optional<std::string> train_memory_refusal(const TrainPlan& plan, const RankMemory& need,
                                                const RunMemoryBudgets& budgets, bool serial_reference) {
    const double states =
        need.of(MemoryCategory::params) + need.of(MemoryCategory::grads) + need.of(MemoryCategory::optimizer);
    const std::string reference = serial_reference ? "--check with " : "";
    const std::string of = serial_reference ? " of --check's serial reference (the global batch on rank 0)" : "";
    return placed_memory_refusal(
        {{"parameters, gradients, optimizer state and the scheme's buffers" + of, states, reference + model_flag(plan)},
         {"activations and scratch" + of, need.of(MemoryCategory::activations), reference + batch_flags(plan)}},
        {}, budgets.device, budgets.host,
        "use a smaller model, batch or sequence, more --microbatches, shard with --zero, --tp, --pp, --cp or --ep, "
        "recompute, or run fewer ranks per host");
}

}  // namespace parbench
