#include "theory/moe_buffers.hpp"

#include <algorithm>

namespace parbench {

std::size_t MoeKeptBuffers::total() const {
    return scores + chosen + weights + slot + expert_start + routed + dispatched + gate + up + glu + expert_out +
           shared_gate + shared_up + shared_glu + received + received_out + received_counts;
}

std::size_t MoeScratchBuffers::total() const {
    return logits + dlogits + dweights + dexpert_out + ddispatched + dreceived_out + dreceived + dglu + dgate + dup +
           expert_tensor_sum;
}

std::size_t MoeGradientPackBuffers::total() const {
    return router + experts_gate + experts_up + experts_down + shared_gate + shared_up + shared_down;
}

MoeKeptBuffers moe_kept_buffers(const MoeMemoryShape& s) {
    const std::size_t N = s.tokens, E = s.experts, k = s.top_k, C = s.hidden;
    const std::size_t Re = s.expert_rows(), Fr = s.routed_hidden(), SFe = s.shared_experts * s.expert_hidden;
    const bool gated = s.activation == ExpertActivation::swiglu;
    MoeKeptBuffers b;
    b.scores = N * E;
    b.chosen = b.weights = b.slot = N * k;
    b.expert_start = E + 1;
    b.routed = E;
    b.dispatched = b.expert_out = N * k * C;
    b.gate = b.glu = Re * Fr;
    b.up = gated ? Re * Fr : 0;
    b.shared_gate = b.shared_glu = N * SFe;
    b.shared_up = gated ? N * SFe : 0;
    if (s.ep > 1) {
        b.received = b.received_out = Re * C;
        b.received_counts = E;
    }
    return b;
}

MoeScratchBuffers moe_scratch_buffers(const MoeMemoryShape& s) {
    const std::size_t N = s.tokens, E = s.experts, k = s.top_k, C = s.hidden;
    const std::size_t Re = s.expert_rows();
    // The shared experts' gradients reuse the routed experts' when they are the wider.
    const std::size_t widest = std::max(Re * s.routed_hidden(), N * s.shared_experts * s.expert_hidden);
    MoeScratchBuffers b;
    b.logits = b.dlogits = N * E;
    b.dweights = N * k;
    b.dexpert_out = b.ddispatched = N * k * C;
    if (s.ep > 1) b.dreceived_out = b.dreceived = Re * C;
    b.dglu = b.dgate = widest;
    b.dup = s.activation == ExpertActivation::swiglu ? widest : 0;
    if (s.etp > 1) b.expert_tensor_sum = N * C;
    return b;
}

MoeGradientPackBuffers moe_gradient_pack_buffers(const MoeMemoryShape& s) {
    const std::size_t C = s.hidden, local = s.experts / s.ep, Fr = s.routed_hidden();
    const std::size_t SFe = s.shared_experts * s.expert_hidden;
    const bool gated = s.activation == ExpertActivation::swiglu;
    return MoeGradientPackBuffers{s.experts * C, local * Fr * C, gated ? local * Fr * C : 0, local * C * Fr,
                                  SFe * C,       gated ? SFe * C : 0,                      C * SFe};
}

}  // namespace parbench
