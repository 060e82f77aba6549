// Expert parallelism's degree, checked once for train and plan. Megatron-core (parallel_state.py)
// lays the experts out with a rank generator of its own, order "tp-ep-dp-pp" over the expert
// tensor-parallel, expert-parallel and expert-data-parallel sizes (cp 1), beside the dense one's
// "tp-cp-ep-dp-pp": within a pipeline stage, with the experts' tensor parallelism equal to tp,
// the ep coordinate is the stage's rank / tp mod ep, which in parbench's mesh (tp innermost, then
// cp, then dp) is the rank in the gradient group (dp x cp, dp-major: dp·cp + cp) mod ep. So an
// expert-parallel group is ep consecutive ranks of the dp x cp group, and the ranks at the same
// place in each group, dp x cp / ep of them, form the expert-data-parallel group
// (world / (etp x ep x pp) in Megatron-core's terms). ep must divide dp x cp, and the experts,
// each rank running experts/ep of them.
#pragma once

#include "theory/model_config.hpp"
#include "theory/traffic.hpp"

namespace parbench {

// Which routed experts a rank's layout holds: rank `rank` of an expert-parallel group of `size`
// holds experts [rank·E/size, (rank+1)·E/size) (theory/model_layout.hpp); size 1: all of them.
// Under the experts' own tensor parallelism (--etp, over the tp group) rank `tensor_rank` of
// `tensor_size` holds a slice of each of them as of a dense MLP (Megatron-LM, arXiv 1909.08053
// sec. 3): rows [r·Fe/etp, (r+1)·Fe/etp) of the first matrices (column-parallel), the same
// columns of the second (row-parallel).
struct ExpertSplit {
    int rank = 0;
    int size = 1;
    int tensor_rank = 0;
    int tensor_size = 1;
};

// The refusal of a mixture-of-experts flag (as `flag` names it: --ep 2, --moe-imbalance, ...) on
// `model`, which has no experts.
std::string dense_model_moe_flag_refusal(const std::string& flag, const ModelConfig& model);

// UsageError naming --etp and the fix unless `etp` is 1 or `tp` (Megatron-core's expert tensor
// parallelism; parbench's experts are split over the tp group or not at all), or when it cannot
// split the model's experts (`sequence_parallel`: not yet with --sp).
void check_expert_tensor_parallel(const ModelConfig& model, int etp, int tp, bool sequence_parallel);

// UsageError naming --ep and the fix when `ep` does not fit the model or the dp x cp ranks
// (`dp`, `cp`: the degrees, for the message).
void check_expert_parallel(const ModelConfig& model, int ep, int dp, int cp = 1);

// What the experts' tensor parallelism adds to the tp group's traffic per step (etp > 1):
// per MoE layer and micro-batch one all-reduce of the N·C routed output partial sums in forward,
// and in backward one of the N·k combine weights' partial gradients and one of the N·C routed
// input-gradient partial sums (train/moe/moe_layer.hpp), the forward's again under full
// recompute; N = `tokens` rows a rank routes per micro-batch, k the experts per token.
TrafficByOp expert_tensor_parallel_traffic(const ModelConfig& config, double tokens, int microbatches, int etp,
                                           const ModelShare& share, Recompute recompute);

// `gradient_rank`: the rank in the gradient group (dp x cp, group rank dp·cp + cp; the dp
// coordinate when cp is 1). The expert-parallel group it belongs to (ranks with the same value
// form one group) and its place in it.
inline int expert_parallel_group(int gradient_rank, int ep) { return gradient_rank / ep; }
inline int expert_parallel_rank(int gradient_rank, int ep) { return gradient_rank % ep; }
// The expert-data-parallel group: the gradient group's ranks at the same place in their
// expert-parallel groups (they hold the same experts), gradient_ranks / ep of them.
inline int expert_data_parallel_group(int gradient_rank, int ep) { return expert_parallel_rank(gradient_rank, ep); }
inline int expert_data_parallel_size(int gradient_ranks, int ep) { return gradient_ranks / ep; }

}  // namespace parbench
