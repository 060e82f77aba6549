// 1F1B (PipeDream-Flush; Narayanan et al., arXiv 2104.04473 sec. 2.2, fig. 4 top): rank r
// runs p - r - 1 warm-up forwards, then alternates one forward and one backward, then drains
// the remaining backwards. The bubble equals GPipe's, but rank r never holds more than
// p - r micro-batches' activations instead of m.
#include <algorithm>

#include "theory/pipeline/schedule.hpp"

namespace parbench::detail {

ComputeOrder one_f_one_b_order(const ScheduleShape& shape) {
    const int p = shape.stages;
    const int m = shape.microbatches;
    ComputeOrder order(static_cast<std::size_t>(p));
    for (int rank = 0; rank < p; ++rank) {
        auto& actions = order[static_cast<std::size_t>(rank)];
        one_f_one_b_steps(std::min(p - rank - 1, m), m, [&actions](ActionKind kind, int microbatch, bool) {
            actions.push_back(Action{kind, microbatch, 0, -1});
        });
    }
    return order;
}

}  // namespace parbench::detail
