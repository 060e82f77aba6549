#include "theory/moe_active_flops.hpp"

namespace parbench {

double moe_active_weight_delta(const ModelConfig& config) {
    if (!config.moe) return 0.0;
    const double h = config.hidden, E = config.moe->experts, k = config.moe->top_k, S = config.moe->shared_experts;
    const double fe = config.moe->expert_hidden, f = config.ffn_hidden;
    return config.moe_layer_count() * (h * E + (k + S) * 3.0 * h * fe - 3.0 * h * f);
}

}  // namespace parbench
