// plan_memory_floor, the schedule-free floor --search drops pipelined layouts on before building
// their schedule (plan/layout_search.cpp): never above a layout's memory, and at least the
// model states of its peak rank, under each convention and schedule.
#include <gtest/gtest.h>

#include <string>

#include "plan/layout_plan.hpp"
#include "theory/model_config.hpp"
#include "theory/pipeline/partition.hpp"

namespace parbench {
namespace {

PlanLayout pipelined(const std::string& model, StateConvention states, int tp, int pp, ScheduleKind schedule, int v,
                     int zero) {
    PlanLayout p;
    p.states = states;
    Layout& l = p.engine;
    l.model = load_model_config(std::string(PARBENCH_TEST_MODELS) + "/" + model + ".json");
    l.seq_len = l.model.seq_len;
    l.dp = 2;
    l.tp = tp;
    l.pp = pp;
    l.zero = zero;
    l.microbatches = 2 * pp;
    l.microbatch_size = 1;
    l.global_batch = l.dp * l.microbatches;
    l.schedule = schedule;
    l.virtual_stages = v;
    l.precision = Precision::bf16;
    l.stage_ranges = virtual_stage_layers(l.model.layers, pp, v, {});
    return p;
}

TEST(PlanMemoryFloor, BetweenThePeakRanksStatesAndItsTotal) {
    int checked = 0;
    for (const std::string model : {"gpt3-175b", "llama3-70b"})
        for (const StateConvention states : {StateConvention::megatron, StateConvention::zero, StateConvention::parbench})
            for (const int zero : {0, 1})
                for (const auto& [schedule, v] : {std::pair{ScheduleKind::one_f_one_b, 1}, std::pair{ScheduleKind::gpipe, 1},
                                                  std::pair{ScheduleKind::zero_bubble_h1, 1},
                                                  std::pair{ScheduleKind::interleaved, 2}}) {
                    const PlanLayout p = pipelined(model, states, 8, 4, schedule, v, zero);
                    SCOPED_TRACE(model + " " + states_name(states) + " z" + std::to_string(zero) + " " +
                                 schedule_kind_name(schedule));
                    const PlanMemory memory = plan_memory(p);
                    const double floor = plan_memory_floor(p);
                    EXPECT_LE(floor, memory.total);
                    // The peak rank's states are among those the floor takes the most of (parbench's
                    // ledger counts the tied embedding's gradient scratch with the gradients; the
                    // floor leaves it out, the schemes' items being all it sums).
                    double states = memory.params + memory.grads + memory.optimizer;
                    for (const MemoryItem& item : memory.items)
                        if (item.name == "tied-embedding gradient scratch") states -= item.bytes();
                    EXPECT_GE(floor, states * (1 - 1e-12));
                    // Activations and buffers (what a schedule changes) are left out: strictly below.
                    EXPECT_LT(floor, memory.total);
                    ++checked;
                }
    EXPECT_EQ(checked, 48);
}

TEST(PlanMemoryFloor, TheFirstStageHoldsTheEmbeddingAndSetsTheFloor) {
    // GPT-3 175B on 4 stages of 24 layers: the first stage also holds the embedding, its states
    // the most; every rank's states alike otherwise.
    const PlanLayout p = pipelined("gpt3-175b", StateConvention::megatron, 8, 4, ScheduleKind::one_f_one_b, 1, 0);
    const ParameterLayout whole = model_parameter_layout(p.engine.model, p.engine.seq_len,
                                                         TensorSplit{0, 8, false, TensorParallelStyle::megatron},
                                                         ExpertSplit{0, 1});
    const double first = static_cast<double>(engine_rank_unscheduled(p.engine, 0, &whole).layout.total_numel());
    const ModelStateBytes states = model_state_bytes(StateConvention::megatron, first, 0, 2);
    EXPECT_DOUBLE_EQ(plan_memory_floor(p), states.params + states.grads + states.optimizer);
}

}  // namespace
}  // namespace parbench
