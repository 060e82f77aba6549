// The part of an MoE layer's routing that runs on the host whatever the device: the capacity
// and the expert-major order (assign_expert_rows), and the row counts the expert loop and the
// exchange's sizes read. On a GPU each copy_to_host below syncs the stream (moe_layer.hpp says
// where the step waits); on the CPU they are memcpys of a few ints per token.
#include <algorithm>
#include <cstddef>

#include "train/moe/moe_layer.hpp"

namespace parbench {

RoutingCounts MoeLayer::route(const RoutingBuffers& routing, const float* bias, const RoutingHold& hold) {
    const std::size_t N = shape_.tokens, E = shape_.experts, k = shape_.top_k;
    const float* device_bias = nullptr;
    if (bias != nullptr) {
        ops_.copy_from_host(dlogits_, bias, E * sizeof(float));
        device_bias = dlogits_;
    }
    ops_.moe_route(routing.scores, routing.chosen, routing.weights, logits_, device_bias, router_.tokens,
                   router_.experts, router_.top_k, router_.score);
    host_.chosen.resize(N * k);
    host_.weights.resize(N * k);
    host_.slot.resize(N * k);
    host_.expert_start.resize(E + 1);
    host_.routed.resize(E);
    ops_.copy_to_host(host_.chosen.data(), routing.chosen, N * k * sizeof(int));
    ops_.copy_to_host(host_.weights.data(), routing.weights, N * k * sizeof(float));
    if (hold.follow != nullptr) follow_routing(routing, bias, hold);
    RoutingBuffers on_host;
    on_host.chosen = host_.chosen.data();
    on_host.weights = host_.weights.data();
    on_host.slot = host_.slot.data();
    on_host.expert_start = host_.expert_start.data();
    on_host.routed = host_.routed.data();
    std::vector<std::pair<int, double>> drop_flips;
    FollowedDrops followed_drops;
    if (hold.follow != nullptr) followed_drops = FollowedDrops{host_.followed_kept.data(), &drop_flips};
    const RoutingCounts counts = assign_expert_rows(on_host, router_, followed_drops);
    for (const auto& [assignment, margin] : drop_flips)
        if (hold.flips != nullptr) hold.flips->push_back({assignment / static_cast<int>(k), margin});
    // Recorded per assignment: its expert e, or -(e + 1) where the capacity dropped it.
    if (hold.taken != nullptr) {
        hold.taken->resize(N * k);
        for (std::size_t a = 0; a < N * k; ++a)
            (*hold.taken)[a] = host_.slot[a] >= 0 ? host_.chosen[a] : -(host_.chosen[a] + 1);
    }
    ops_.copy_from_host(routing.slot, host_.slot.data(), N * k * sizeof(int));
    ops_.copy_from_host(routing.expert_start, host_.expert_start.data(), (E + 1) * sizeof(int));
    ops_.copy_from_host(routing.routed, host_.routed.data(), E * sizeof(int));
    return counts;
}

// The margin of a flip: how much higher the router's own choice scored than the one it follows,
// summed over the experts in one and not the other (>= 0: its own are its top k). Scores with
// the balancing bias, as the choice is made (kernels/moe_router_math.hpp's moe_top_k).
void MoeLayer::follow_routing(const RoutingBuffers& routing, const float* bias, const RoutingHold& hold) {
    const std::size_t N = shape_.tokens, E = shape_.experts, k = shape_.top_k;
    host_.scores.resize(N * E);
    ops_.copy_to_host(host_.scores.data(), routing.scores, N * E * sizeof(float));
    // hold.follow holds route's record: an expert e kept, -(e + 1) dropped.
    host_.followed_chosen.resize(N * k);
    host_.followed_kept.resize(N * k);
    for (std::size_t a = 0; a < N * k; ++a) {
        const int e = hold.follow[a];
        host_.followed_chosen[a] = e >= 0 ? e : -e - 1;
        host_.followed_kept[a] = e >= 0 ? 1 : 0;
    }
    bool changed = false;
    for (std::size_t t = 0; t < N; ++t) {
        int* own = host_.chosen.data() + t * k;
        const int* given = host_.followed_chosen.data() + t * k;
        if (std::equal(own, own + k, given)) continue;
        const float* scores = host_.scores.data() + t * E;
        const auto value = [&](int e) { return static_cast<double>(scores[e]) + (bias != nullptr ? bias[e] : 0.0f); };
        double margin = 0.0;
        bool other_experts = false;
        for (std::size_t i = 0; i < k; ++i) {
            if (std::find(given, given + k, own[i]) == given + k) {
                margin += value(own[i]);
                other_experts = true;
            }
            if (std::find(own, own + k, given[i]) == own + k) margin -= value(given[i]);
        }
        // The same experts in another order changes only the combine's order: arithmetic.
        if (hold.flips != nullptr && other_experts) hold.flips->push_back({static_cast<int>(t), margin});
        std::copy(given, given + k, own);
        moe_combine_weights(host_.weights.data() + t * k, scores, own, static_cast<int>(k));
        changed = true;
    }
    if (!changed) return;
    ops_.copy_from_host(routing.chosen, host_.chosen.data(), N * k * sizeof(int));
    ops_.copy_from_host(routing.weights, host_.weights.data(), N * k * sizeof(float));
}

void MoeLayer::fetch_row_counts(const MoeActivations& a) {
    const std::size_t E = shape_.experts;
    host_.expert_start.resize(E + 1);
    ops_.copy_to_host(host_.expert_start.data(), a.routing.expert_start, (E + 1) * sizeof(int));
    if (parallel()) {
        host_.received_counts.resize(E);
        ops_.copy_to_host(host_.received_counts.data(), a.received_counts, E * sizeof(int));
    }
}

}  // namespace parbench
