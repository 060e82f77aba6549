// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", arXiv 2401.10241 sec. 2.1, fig. 3
// top): the backward splits into B (the input gradient, on the critical path between stages)
// and W (the weight gradient, which nothing downstream waits for). Warm-up and steady state
// follow 1F1B with B in place of the backward, but a rank runs a W only once it holds p
// micro-batches in flight (forward done, W not yet), so later ranks, which warm up with
// fewer forwards, defer their first W's: B's reach the first rank sooner, and the deferred
// W's fill the cool-down. Every rank holds at most p micro-batches, 1F1B's peak (on its
// first rank). With T_F = T_B = T_W the bubble is (p-1)(T_F + T_B - T_W), a third of 1F1B's.
#include <algorithm>

#include "theory/pipeline/schedule.hpp"

namespace parbench::detail {

ComputeOrder zero_bubble_h1_order(const ScheduleShape& shape) {
    const int p = shape.stages;
    const int m = shape.microbatches;
    ComputeOrder order(static_cast<std::size_t>(p));
    for (int rank = 0; rank < p; ++rank) {
        auto& actions = order[static_cast<std::size_t>(rank)];
        int forwards_done = 0;
        int weight = 0;
        one_f_one_b_steps(std::min(p - rank - 1, m), m, [&](ActionKind kind, int microbatch, bool draining) {
            actions.push_back(Action{kind, microbatch, 0, -1});
            if (kind == ActionKind::forward)
                forwards_done = microbatch + 1;
            else if (draining || forwards_done - weight >= p)  // p in flight, or the cool-down
                actions.push_back(Action{ActionKind::weight, weight++, 0, -1});
        });
        while (weight < m) actions.push_back(Action{ActionKind::weight, weight++, 0, -1});
    }
    return order;
}

}  // namespace parbench::detail
