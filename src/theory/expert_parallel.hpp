// Expert parallelism's degree, checked once for train (and whoever lays out an MoE model on
// ranks). Megatron-core (parallel_state.py, order "tp-cp-ep-dp-pp") carves the expert-parallel
// group out of the data-parallel ranks: ep consecutive data-parallel coordinates form an
// expert-parallel group, and the ranks at the same place in each group (dp/ep of them) form
// the expert-data-parallel group. So ep must divide dp, and it must divide the experts, each
// rank running experts/ep of them.
#pragma once

#include "theory/model_config.hpp"

namespace parbench {

// UsageError naming --ep and the fix when `ep` does not fit the model or the dp ranks.
void check_expert_parallel(const ModelConfig& model, int ep, int dp);

// The expert-parallel group of data-parallel coordinate `dp_rank` (ranks with the same value
// form one group) and the rank's place in it.
inline int expert_parallel_group(int dp_rank, int ep) { return dp_rank / ep; }
inline int expert_parallel_rank(int dp_rank, int ep) { return dp_rank % ep; }

}  // namespace parbench
