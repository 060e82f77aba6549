#include "theory/pipeline/paired_passes.hpp"

namespace parbench {

int paired_group_end(const std::vector<Step>& steps, std::size_t first, int pp_rank, int stages) {
    const Step& head = steps.at(first);
    if (!head.compute || head.compute->kind != ActionKind::forward || pp_rank == stages - 1) return -1;
    const Action& forward = *head.compute;
    for (std::size_t i = first + 1; i < steps.size(); ++i) {
        const Step& step = steps[i];
        if (!step.compute) continue;
        const Action& backward = *step.compute;
        if (backward.kind != ActionKind::backward || backward.microbatch == forward.microbatch ||
            backward.chunk != forward.chunk)
            return -1;
        // Only F's activation send and B's gradient receive may sit between them.
        for (std::size_t t = first + 1; t < i; ++t) {
            const Step& between = steps[t];
            if (between.send &&
                !(between.send->kind == ActionKind::send_activation && between.send->microbatch == forward.microbatch))
                return -1;
            if (between.recv &&
                !(between.recv->kind == ActionKind::recv_gradient && between.recv->microbatch == backward.microbatch))
                return -1;
        }
        return static_cast<int>(i);
    }
    return -1;
}

std::vector<int> paired_group_ends(const std::vector<Step>& steps, int pp_rank, int stages) {
    std::vector<int> ends;
    ends.reserve(steps.size());
    for (std::size_t i = 0; i < steps.size(); ++i) ends.push_back(paired_group_end(steps, i, pp_rank, stages));
    return ends;
}

std::vector<int> paired_groups_per_rank(const Schedule& schedule, P2pMode mode) {
    std::vector<int> groups;
    const int stages = schedule.shape.stages;
    for (int rank = 0; rank < stages; ++rank) {
        const std::vector<Step> steps = rank_steps(schedule.ranks.at(static_cast<std::size_t>(rank)), mode);
        // The executor runs a group and goes on after its end: groups never overlap.
        int count = 0;
        for (std::size_t i = 0; i < steps.size(); ++i) {
            const int end = paired_group_end(steps, i, rank, stages);
            if (end < 0) continue;
            ++count;
            i = static_cast<std::size_t>(end);
        }
        groups.push_back(count);
    }
    return groups;
}

}  // namespace parbench
