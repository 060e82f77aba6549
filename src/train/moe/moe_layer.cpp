#include "train/moe/moe_layer.hpp"

#include <algorithm>

#include "train/models/transformer_parts.hpp"

namespace parbench {
namespace {

int as_int(std::size_t n) { return static_cast<int>(n); }

}  // namespace

MoeLayer::MoeLayer(const MoeMemoryShape& shape, MoeScore score, const MoeSettings& settings, Ops& ops,
                   ActivationArena& arena)
    : shape_(shape), settings_(settings), ops_(ops) {
    router_ = RouterShape{as_int(shape.tokens), as_int(shape.experts), as_int(shape.top_k), score,
                          settings.capacity_factor};
    const std::size_t N = shape.tokens, E = shape.experts, k = shape.top_k, C = shape.hidden;
    const std::size_t widest = std::max(N * k, N * shape.shared_experts) * shape.expert_hidden;
    // moe_scratch_bytes' list, in its order.
    logits_ = arena.floats(N * E);
    dlogits_ = arena.floats(N * E);
    dweights_ = arena.floats(N * k);
    dexpert_out_ = arena.floats(N * k * C);
    ddispatched_ = arena.floats(N * k * C);
    dglu_ = arena.floats(widest);
    dgate_ = arena.floats(widest);
    dup_ = arena.floats(widest);
}

MoeActivations MoeLayer::allocate_activations(ActivationArena& arena) const {
    const std::size_t N = shape_.tokens, E = shape_.experts, k = shape_.top_k, C = shape_.hidden;
    const std::size_t Fe = shape_.expert_hidden, S = shape_.shared_experts;
    // moe_kept_bytes' list, in its order.
    MoeActivations a;
    a.routing.scores = arena.floats(N * E);
    a.routing.chosen = arena.buffer(N * k * sizeof(int)).as<int>();
    a.routing.weights = arena.floats(N * k);
    a.routing.slot = arena.buffer(N * k * sizeof(int)).as<int>();
    a.routing.expert_start = arena.buffer((E + 1) * sizeof(int)).as<int>();
    a.routing.routed = arena.buffer(E * sizeof(int)).as<int>();
    a.dispatched = arena.floats(N * k * C);
    a.gate = arena.floats(N * k * Fe);
    a.up = arena.floats(N * k * Fe);
    a.glu = arena.floats(N * k * Fe);
    a.expert_out = arena.floats(N * k * C);
    if (S > 0) {
        a.shared_gate = arena.floats(N * S * Fe);
        a.shared_up = arena.floats(N * S * Fe);
        a.shared_glu = arena.floats(N * S * Fe);
    }
    return a;
}

MoeForwardResult MoeLayer::forward(float* out, const MoeActivations& a, const float* x, const MoeWeights& w,
                                   const float* bias) {
    const int N = as_int(shape_.tokens), E = as_int(shape_.experts), k = as_int(shape_.top_k);
    const int C = as_int(shape_.hidden), Fe = as_int(shape_.expert_hidden), SFe = as_int(shape_.shared_experts) * Fe;
    // The router in fp32 whatever the precision (Megatron-core's router dtype fp32 keeps the
    // choice stable).
    ops_.matmul_forward(logits_, x, w.router, nullptr, N, C, E);
    MoeForwardResult result;
    result.counts = route_tokens(a.routing, logits_, bias, router_);
    const std::size_t row = static_cast<std::size_t>(C);
    // Dispatch: each kept assignment's token row into its expert-major row.
    for (int t = 0; t < N; ++t)
        for (int i = 0; i < k; ++i) {
            const int slot = a.routing.slot[t * k + i];
            if (slot >= 0)
                std::copy_n(x + static_cast<std::size_t>(t) * row, C,
                            a.dispatched + static_cast<std::size_t>(slot) * row);
        }
    // Each expert over its rows.
    for (int e = 0; e < E; ++e) {
        const int first = a.routing.expert_start[e];
        const int rows = a.routing.expert_start[e + 1] - first;
        if (rows == 0) continue;
        const std::size_t in = static_cast<std::size_t>(first) * C, wide = static_cast<std::size_t>(first) * Fe;
        const std::size_t weight = static_cast<std::size_t>(e) * Fe * C;
        ops_.matmul_forward(a.gate + wide, a.dispatched + in, w.experts_gate + weight, nullptr, rows, C, Fe);
        ops_.matmul_forward(a.up + wide, a.dispatched + in, w.experts_up + weight, nullptr, rows, C, Fe);
        ops_.swiglu_forward(a.glu + wide, a.gate + wide, a.up + wide, static_cast<std::size_t>(rows) * Fe);
        ops_.matmul_forward(a.expert_out + in, a.glu + wide, w.experts_down + weight, nullptr, rows, Fe, C);
    }
    // Shared experts over every token (one SwiGLU of width S·Fe), then the combine adds the
    // routed outputs with their weights.
    if (SFe > 0) {
        ops_.matmul_forward(a.shared_gate, x, w.shared_gate, nullptr, N, C, SFe);
        ops_.matmul_forward(a.shared_up, x, w.shared_up, nullptr, N, C, SFe);
        ops_.swiglu_forward(a.shared_glu, a.shared_gate, a.shared_up, static_cast<std::size_t>(N) * SFe);
        ops_.matmul_forward(out, a.shared_glu, w.shared_down, nullptr, N, SFe, C);
    } else {
        ops_.fill(out, 0.0f, static_cast<std::size_t>(N) * C);
    }
    for (int t = 0; t < N; ++t) {
        float* row = out + static_cast<std::size_t>(t) * C;
        for (int i = 0; i < k; ++i) {
            const int slot = a.routing.slot[t * k + i];
            if (slot < 0) continue;
            const float weight = a.routing.weights[t * k + i];
            const float* expert_row = a.expert_out + static_cast<std::size_t>(slot) * C;
            for (int c = 0; c < C; ++c) row[c] += weight * expert_row[c];
        }
    }
    if (settings_.aux_loss_coeff > 0.0)
        result.aux_loss = balancing_loss(a.routing, result.counts, router_, settings_.aux_loss_coeff);
    return result;
}

void MoeLayer::backward(float* dx, const MoeGradients& g, const float* dout, const MoeActivations& a, const float* x,
                        const MoeWeights& w, double balance_weight) {
    const int N = as_int(shape_.tokens), E = as_int(shape_.experts), k = as_int(shape_.top_k);
    const int C = as_int(shape_.hidden), Fe = as_int(shape_.expert_hidden), SFe = as_int(shape_.shared_experts) * Fe;
    // The combine's backward: d(weight) = dy · FFN(x), d(FFN(x)) = weight · dy.
    for (int t = 0; t < N; ++t) {
        const float* dy = dout + static_cast<std::size_t>(t) * C;
        for (int i = 0; i < k; ++i) {
            const int slot = a.routing.slot[t * k + i];
            dweights_[t * k + i] = 0.0f;
            if (slot < 0) continue;
            const float* expert_row = a.expert_out + static_cast<std::size_t>(slot) * C;
            float* dexpert_row = dexpert_out_ + static_cast<std::size_t>(slot) * C;
            const float weight = a.routing.weights[t * k + i];
            float dot = 0.0f;
            for (int c = 0; c < C; ++c) {
                dot += dy[c] * expert_row[c];
                dexpert_row[c] = weight * dy[c];
            }
            dweights_[t * k + i] = dot;
        }
    }
    // The experts' backward on their expert-major rows.
    const int kept = a.routing.expert_start[E];
    ops_.fill(ddispatched_, 0.0f, static_cast<std::size_t>(kept) * C);
    for (int e = 0; e < E; ++e) {
        const int first = a.routing.expert_start[e];
        const int rows = a.routing.expert_start[e + 1] - first;
        if (rows == 0) continue;
        const std::size_t in = static_cast<std::size_t>(first) * C, wide = static_cast<std::size_t>(first) * Fe;
        const std::size_t weight = static_cast<std::size_t>(e) * Fe * C;
        const std::size_t n = static_cast<std::size_t>(rows) * Fe;
        ops_.fill(dglu_, 0.0f, n);
        ops_.matmul_backward(dglu_, g.experts_down + weight, nullptr, dexpert_out_ + in, a.glu + wide,
                             w.experts_down + weight, rows, Fe, C);
        ops_.fill(dgate_, 0.0f, n);
        ops_.fill(dup_, 0.0f, n);
        ops_.swiglu_backward(dgate_, dup_, dglu_, a.gate + wide, a.up + wide, n);
        ops_.matmul_backward(ddispatched_ + in, g.experts_gate + weight, nullptr, dgate_, a.dispatched + in,
                             w.experts_gate + weight, rows, C, Fe);
        ops_.matmul_backward(ddispatched_ + in, g.experts_up + weight, nullptr, dup_, a.dispatched + in,
                             w.experts_up + weight, rows, C, Fe);
    }
    // Un-permute: each kept assignment's input gradient back to its token.
    for (int t = 0; t < N; ++t) {
        float* row = dx + static_cast<std::size_t>(t) * C;
        for (int i = 0; i < k; ++i) {
            const int slot = a.routing.slot[t * k + i];
            if (slot < 0) continue;
            const float* drow = ddispatched_ + static_cast<std::size_t>(slot) * C;
            for (int c = 0; c < C; ++c) row[c] += drow[c];
        }
    }
    if (SFe > 0) {
        const std::size_t n = static_cast<std::size_t>(N) * SFe;
        ops_.fill(dglu_, 0.0f, n);
        ops_.matmul_backward(dglu_, g.shared_down, nullptr, dout, a.shared_glu, w.shared_down, N, SFe, C);
        ops_.fill(dgate_, 0.0f, n);
        ops_.fill(dup_, 0.0f, n);
        ops_.swiglu_backward(dgate_, dup_, dglu_, a.shared_gate, a.shared_up, n);
        ops_.matmul_backward(dx, g.shared_gate, nullptr, dgate_, x, w.shared_gate, N, C, SFe);
        ops_.matmul_backward(dx, g.shared_up, nullptr, dup_, x, w.shared_up, N, C, SFe);
    }
    route_backward(dlogits_, dweights_, a.routing, router_, balance_weight);
    ops_.matmul_backward(dx, g.router, nullptr, dlogits_, x, w.router, N, C, E);
}

}  // namespace parbench
