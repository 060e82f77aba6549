// A mixture-of-experts router over one routing group of N tokens (host memory): scores and
// top-k choice per token (kernels/moe_router_math.hpp), the capacity limit that drops
// assignments, the expert-major order the experts read their tokens in, and the Switch/GShard
// load-balancing loss. One group is one micro-batch on one data-parallel rank: the capacity and
// the balancing loss count over its tokens (Megatron-core's per-micro-batch semantics), so a
// reference run must route the same groups to agree (train_run.cpp's serial reference does).
//
// Buffers are the caller's (the model's activation arena), so the memory ledger counts them.
#pragma once

#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

#include "kernels/moe_router_math.hpp"

namespace parbench {

struct RouterShape {
    int tokens = 0;   // N, the group
    int experts = 0;  // E
    int top_k = 0;    // k
    MoeScore score = MoeScore::softmax;
    // Megatron-core's --moe-expert-capacity-factor: each expert takes at most
    // ceil(factor · N · k / E) assignments; unset: dropless (every assignment runs).
    std::optional<double> capacity_factor;
};

// Assignments an expert may take in a group, or -1 when dropless.
int expert_capacity(const RouterShape& shape);

// What routing one group decides, kept for backward. Assignment a = t·k + i is token t's i-th
// choice.
struct RoutingBuffers {
    float* scores = nullptr;      // (N,E) score function's output
    int* chosen = nullptr;        // (N,k) expert of each assignment
    float* weights = nullptr;     // (N,k) combine weights (before dropping)
    int* slot = nullptr;          // (N,k) row of the assignment in expert-major order, -1 dropped
    int* expert_start = nullptr;  // (E+1) first expert-major row of each expert; [E] = rows kept
    int* routed = nullptr;        // (E) assignments chosen per expert, before the capacity
};

struct RoutingCounts {
    std::vector<int> routed;  // (E) assignments chosen per expert, before the capacity
    std::vector<int> kept;    // (E) after it
    int dropped = 0;
};

// Routes a group from its router logits (N,E); `bias` (E, or null): DeepSeek-V3's balancing
// bias, added to the scores for the choice only. Dropping follows Megatron-core's "probs"
// policy: an expert over capacity keeps its assignments of the highest weight, ties to the
// lower token. Expert-major rows keep token order within an expert.
RoutingCounts route_tokens(const RoutingBuffers& routing, const float* logits, const float* bias,
                           const RouterShape& shape);

// Drops decided elsewhere (--check's serial reference follows the run's, train/moe/routing_trace.hpp):
// `kept` (N·k; 1 kept, 0 dropped) says which assignments an expert over its capacity keeps,
// instead of their weights; `flips` gets, per expert whose own choice would have kept others,
// the first assignment it keeps against its weights and the weight margin (the kept weight its
// own choice had over the one followed, >= 0).
struct FollowedDrops {
    const unsigned char* kept = nullptr;
    std::vector<std::pair<int, double>>* flips = nullptr;
};

// route_tokens' second half, for routing whose per-token part ran elsewhere (an Ops's
// moe_route, on a GPU): from chosen and weights (host memory), the capacity and the
// expert-major order: writes slot, expert_start and routed; scores is not read.
RoutingCounts assign_expert_rows(const RoutingBuffers& routing, const RouterShape& shape,
                                 const FollowedDrops& follow = {});

// The Switch-form balancing loss of a routed group (Fedus et al., arXiv 2101.03961 eq. 4-6,
// with Megatron-core's top-k normalisation):
//     L_aux = alpha · E / (N² k) · sum_e routed_e · sum_t P_te
// which is alpha for a perfectly balanced router. P: moe_balance_probabilities.
double balancing_loss(const RoutingBuffers& routing, const RoutingCounts& counts, const RouterShape& shape,
                      double alpha);

// dlogits (N,E) = the gradient through the kept assignments' weights, from dweights (N,k)
// (a dropped assignment's is ignored: its expert never ran), plus `balance_weight` ·
// d(L_aux / alpha)/d(logits), balance_weight being alpha times the group's weight in the step
// loss (0: no balancing loss). Overwrites dlogits.
void route_backward(float* dlogits, const float* dweights, const RoutingBuffers& routing, const RouterShape& shape,
                    double balance_weight);

}  // namespace parbench
