// The part of an MoE layer's routing that runs on the host whatever the device: the capacity
// and the expert-major order (assign_expert_rows), and the row counts the expert loop and the
// exchange's sizes read. On a GPU each copy_to_host below syncs the stream (moe_layer.hpp says
// where the step waits); on the CPU they are memcpys of a few ints per token.
#include <cstddef>

#include "train/moe/moe_layer.hpp"

namespace parbench {

RoutingCounts MoeLayer::route(const RoutingBuffers& routing, const float* bias) {
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
    RoutingBuffers on_host;
    on_host.chosen = host_.chosen.data();
    on_host.weights = host_.weights.data();
    on_host.slot = host_.slot.data();
    on_host.expert_start = host_.expert_start.data();
    on_host.routed = host_.routed.data();
    const RoutingCounts counts = assign_expert_rows(on_host, router_);
    ops_.copy_from_host(routing.slot, host_.slot.data(), N * k * sizeof(int));
    ops_.copy_from_host(routing.expert_start, host_.expert_start.data(), (E + 1) * sizeof(int));
    ops_.copy_from_host(routing.routed, host_.routed.data(), E * sizeof(int));
    return counts;
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
