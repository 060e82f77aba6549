// Which of a pipeline rank's steps run as a paired forward/backward group under
// --moe-a2a-overlap-1f1b: the one rule train's executor runs (train/pipeline/pipeline_executor.cpp)
// and plan prices (plan/moe_plan.hpp), so the two count the same groups.
//
// In 1F1B's steady state a rank that is not the last runs F(j) and then B(i), i != j, on the same
// chunk, with only F(j)'s activation send and B(i)'s gradient receive between them: the two
// passes are independent, and the executor runs them as two fibers that hand the thread over at
// each MoE exchange, one micro-batch's all-to-all travelling under the other's compute. Warm-up
// forwards, cool-down backwards and every pass of the last stage (whose F(i) feeds its own B(i))
// stay unpaired.
#pragma once

#include <cstddef>
#include <vector>

#include "theory/pipeline/schedule_simulation.hpp"

namespace parbench {

// The index of the last step of the paired group that starts at steps[first] (its B), or -1 when
// no group starts there. `pp_rank` of `stages` ranks; `steps` that rank's, as rank_steps gives them.
int paired_group_end(const std::vector<Step>& steps, std::size_t first, int pp_rank, int stages);
// paired_group_end for every step (found once: a rank's steps are fixed for a run).
std::vector<int> paired_group_ends(const std::vector<Step>& steps, int pp_rank, int stages);
// Per pipeline rank, how many paired groups one training step runs (0 on the last rank).
std::vector<int> paired_groups_per_rank(const Schedule& schedule, P2pMode mode);

}  // namespace parbench
