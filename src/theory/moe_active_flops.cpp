#include "theory/moe_active_flops.hpp"

namespace parbench {

double moe_active_weight_delta(const ModelConfig& config) {
    if (!config.moe) return 0.0;
    const double h = config.hidden, E = config.moe->experts, k = config.moe->top_k, S = config.moe->shared_experts;
    const double fe = config.moe->expert_hidden, m = config.moe->matrices_per_expert();
    // The dense MLP's weights: Llama's SwiGLU 3·h·f, GPT's h -> 4h -> h.
    const double dense = config.kind == ModelKind::llama ? 3.0 * h * config.ffn_hidden : 8.0 * h * h;
    return config.moe_layer_count() * (h * E + (k + S) * m * h * fe - dense);
}

}  // namespace parbench
