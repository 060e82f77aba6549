// Interleaved 1F1B (Narayanan et al., arXiv 2104.04473 sec. 2.2.2, fig. 4 bottom): each rank
// holds v chunks (virtual stages r, r+p, ..., r+(v-1)p). Micro-batches advance through a
// rank's chunks in groups of p: forward step k runs chunk (k mod pv) / p on micro-batch
// (k / pv)·p + k mod p; backward steps visit the chunks in reverse. Rank r warms up with
// 2(p-r-1) + (v-1)p forward steps (Megatron-LM's schedules.py), then alternates. A chunk is
// 1/v of a stage, so the bubble shrinks v-fold at the cost of v-fold more transfers.
#include <algorithm>

#include "theory/pipeline/schedule.hpp"

namespace parbench::detail {
namespace {

Action step_action(ActionKind kind, int step, const ScheduleShape& shape) {
    const int p = shape.stages;
    const int v = shape.virtual_stages;
    const int in_group = step % (p * v);
    const int microbatch = step / (p * v) * p + step % p;
    const int chunk = in_group / p;
    return Action{kind, microbatch, kind == ActionKind::forward ? chunk : v - 1 - chunk, -1};
}

}  // namespace

ComputeOrder interleaved_order(const ScheduleShape& shape) {
    const int p = shape.stages;
    const int v = shape.virtual_stages;
    const int total = shape.microbatches * v;
    ComputeOrder order(static_cast<std::size_t>(p));
    for (int rank = 0; rank < p; ++rank) {
        auto& actions = order[static_cast<std::size_t>(rank)];
        const int warmup = std::min(2 * (p - rank - 1) + (v - 1) * p, total);
        one_f_one_b_steps(warmup, total, [&](ActionKind kind, int step, bool) {
            actions.push_back(step_action(kind, step, shape));
        });
    }
    return order;
}

}  // namespace parbench::detail
