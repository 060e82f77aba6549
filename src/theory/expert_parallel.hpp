// Expert parallelism's degree, checked once for train (and whoever lays out an MoE model on
// ranks). Megatron-core (parallel_state.py, order "tp-cp-ep-dp-pp") carves the expert-parallel
// group out of the data-parallel ranks: ep consecutive data-parallel coordinates form an
// expert-parallel group, and the ranks at the same place in each group (dp/ep of them) form
// the expert-data-parallel group. So ep must divide dp, and it must divide the experts, each
// rank running experts/ep of them.
#pragma once

#include "theory/model_config.hpp"

namespace parbench {

// Which routed experts a rank's layout holds: rank `rank` of an expert-parallel group of `size`
// holds experts [rank·E/size, (rank+1)·E/size) (theory/model_layout.hpp); size 1: all of them.
struct ExpertSplit {
    int rank = 0;
    int size = 1;
};

// UsageError naming --ep and the fix when `ep` does not fit the model or the dp ranks.
void check_expert_parallel(const ModelConfig& model, int ep, int dp);

// The expert-parallel group of data-parallel coordinate `dp_rank` (ranks with the same value
// form one group) and the rank's place in it.
inline int expert_parallel_group(int dp_rank, int ep) { return dp_rank / ep; }
inline int expert_parallel_rank(int dp_rank, int ep) { return dp_rank % ep; }
// The expert-data-parallel group: the gradient group's ranks at the same place in their
// expert-parallel groups (they hold the same experts), gradient_ranks / ep of them.
inline int expert_data_parallel_group(int dp_rank, int ep) { return expert_parallel_rank(dp_rank, ep); }
inline int expert_data_parallel_size(int gradient_ranks, int ep) { return gradient_ranks / ep; }

}  // namespace parbench
