#include "train/moe/router.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace parbench {

int expert_capacity(const RouterShape& shape) {
    if (!shape.capacity_factor) return -1;
    // Megatron-core's get_capacity: ceil(N · k / E · factor).
    const double per_expert = static_cast<double>(shape.tokens) * shape.top_k / shape.experts;
    return static_cast<int>(std::ceil(per_expert * *shape.capacity_factor));
}

RoutingCounts route_tokens(const RoutingBuffers& routing, const float* logits, const float* bias,
                           const RouterShape& shape) {
    const int E = shape.experts, k = shape.top_k;
    for (int t = 0; t < shape.tokens; ++t) {
        const std::size_t row = static_cast<std::size_t>(t) * E, choices = static_cast<std::size_t>(t) * k;
        moe_route_token(routing.scores + row, routing.chosen + choices, routing.weights + choices, logits + row, bias,
                        E, k, shape.score);
    }
    return assign_expert_rows(routing, shape);
}

RoutingCounts assign_expert_rows(const RoutingBuffers& routing, const RouterShape& shape, const FollowedDrops& follow) {
    const int N = shape.tokens, E = shape.experts, k = shape.top_k;
    RoutingCounts counts;
    counts.routed.assign(static_cast<std::size_t>(E), 0);
    counts.kept.assign(static_cast<std::size_t>(E), 0);
    for (int a = 0; a < N * k; ++a) ++counts.routed[static_cast<std::size_t>(routing.chosen[a])];
    // Each expert's assignments in token order; over capacity, those of the highest weight.
    std::vector<std::vector<int>> of_expert(static_cast<std::size_t>(E));
    for (int a = 0; a < N * k; ++a) of_expert[static_cast<std::size_t>(routing.chosen[a])].push_back(a);
    const int capacity = expert_capacity(shape);
    std::fill(routing.slot, routing.slot + static_cast<std::size_t>(N) * k, -1);
    int row = 0;
    for (int e = 0; e < E; ++e) {
        std::vector<int>& assignments = of_expert[static_cast<std::size_t>(e)];
        if (capacity >= 0 && static_cast<int>(assignments.size()) > capacity) {
            const std::size_t chosen_here = assignments.size();
            std::vector<int> own = assignments;
            std::stable_sort(own.begin(), own.end(),
                             [&](int a, int b) { return routing.weights[a] > routing.weights[b]; });
            own.resize(static_cast<std::size_t>(capacity));
            std::sort(own.begin(), own.end());
            if (follow.kept == nullptr) {
                assignments = own;
            } else {
                std::erase_if(assignments, [&](int a) { return follow.kept[a] == 0; });
                if (follow.flips != nullptr && assignments != own) {
                    double margin = 0.0;
                    int first_against = -1;
                    for (int a : own)
                        if (!std::binary_search(assignments.begin(), assignments.end(), a))
                            margin += routing.weights[a];
                    for (int a : assignments)
                        if (!std::binary_search(own.begin(), own.end(), a)) {
                            margin -= routing.weights[a];
                            if (first_against < 0) first_against = a;
                        }
                    follow.flips->emplace_back(first_against, margin);
                }
            }
            counts.dropped += static_cast<int>(chosen_here - assignments.size());
        }
        routing.expert_start[e] = row;
        for (int a : assignments) routing.slot[a] = row++;
        counts.kept[static_cast<std::size_t>(e)] = static_cast<int>(assignments.size());
    }
    routing.expert_start[E] = row;
    std::copy(counts.routed.begin(), counts.routed.end(), routing.routed);
    return counts;
}

double balancing_loss(const RoutingBuffers& routing, const RoutingCounts& counts, const RouterShape& shape,
                      double alpha) {
    const int N = shape.tokens, E = shape.experts;
    std::vector<float> probabilities(static_cast<std::size_t>(E));
    std::vector<double> summed(static_cast<std::size_t>(E), 0.0);
    for (int t = 0; t < N; ++t) {
        moe_balance_probabilities(probabilities.data(), routing.scores + static_cast<std::size_t>(t) * E, E,
                                  shape.score);
        for (int e = 0; e < E; ++e) summed[static_cast<std::size_t>(e)] += probabilities[static_cast<std::size_t>(e)];
    }
    double sum = 0.0;
    for (int e = 0; e < E; ++e) sum += counts.routed[static_cast<std::size_t>(e)] * summed[static_cast<std::size_t>(e)];
    return alpha * E / (static_cast<double>(N) * N * shape.top_k) * sum;
}

void route_backward(float* dlogits, const float* dweights, const RoutingBuffers& routing, const RouterShape& shape,
                    double balance_weight) {
    const int N = shape.tokens, E = shape.experts, k = shape.top_k;
    std::fill(dlogits, dlogits + static_cast<std::size_t>(N) * E, 0.0f);
    // d(L_aux/alpha)/d(P_te) = E · routed_e / (N² k), the same for every token of the group.
    std::vector<float> coefficients(static_cast<std::size_t>(E));
    for (int e = 0; e < E; ++e)
        coefficients[static_cast<std::size_t>(e)] = moe_balance_coefficient(balance_weight, E, routing.routed[e], N, k);
    std::vector<float> kept_dweights(static_cast<std::size_t>(k));
    for (int t = 0; t < N; ++t) {
        const std::size_t a = static_cast<std::size_t>(t) * k;
        for (int i = 0; i < k; ++i) kept_dweights[static_cast<std::size_t>(i)] = routing.slot[a + i] >= 0 ? dweights[a + i] : 0.0f;
        float* d = dlogits + static_cast<std::size_t>(t) * E;
        const float* scores = routing.scores + static_cast<std::size_t>(t) * E;
        moe_weights_backward(d, kept_dweights.data(), routing.weights + a, scores, routing.chosen + a, k, shape.score);
        if (balance_weight != 0.0) moe_balance_backward(d, coefficients.data(), scores, E, shape.score);
    }
}

}  // namespace parbench
