#include "theory/model_flops.hpp"

#include "theory/llama_formulas.hpp"
#include "theory/moe_active_flops.hpp"

namespace parbench {

double megatron_gpt_flops(double batch, double seq, double layers, double hidden, double vocab) {
    return 72.0 * batch * seq * layers * hidden * hidden *
           (1.0 + seq / (6.0 * hidden) + vocab / (12.0 * layers * hidden));
}

double mlp_flops(double batch, double layers, double hidden) { return 6.0 * batch * layers * hidden * hidden; }

double model_flops_per_step(const ModelConfig& config, int global_batch, int seq_len) {
    // A mixture of experts counts its active parameters (theory/moe_active_flops.hpp).
    if (config.kind == ModelKind::llama)
        return llama_model_flops(llama_shape(config), global_batch, seq_len) +
               6.0 * global_batch * seq_len * moe_active_weight_delta(config);
    if (config.kind == ModelKind::gpt)
        return megatron_gpt_flops(global_batch, seq_len, config.layers, config.hidden, config.vocab) +
               6.0 * global_batch * seq_len * moe_active_weight_delta(config);
    return mlp_flops(global_batch, config.layers, config.hidden);
}

std::string flops_formula(const ModelConfig& config) {
    if (config.kind == ModelKind::llama && config.moe)
        return "6*B*s*(l*(2h^2 + 2h*h_kv) + l_dense*3h*f + l_moe*(h*E + (k+S)*3h*f_e) + h*V) + 12*B*l*s^2*h: ACTIVE "
               "parameters, the router and the k routed plus S shared experts a token runs (Megatron-LM's "
               "convention, arXiv 2104.04473 sec. 5.1; no recompute; full s x s attention, no causal discount)";
    if (config.kind == ModelKind::gpt && config.moe)
        return "72*B*s*l*h^2*(1 + s/(6h) + V/(12*l*h)) + 6*B*s*l_moe*(h*E + (k+S)*m*h*f_e - 8h^2): ACTIVE parameters, "
               "each MoE layer's 4h MLP replaced by the router and the k routed plus S shared experts a token runs, "
               "m = 2 (GELU) or 3 (SwiGLU) matrices each (Megatron-LM's convention, arXiv 2104.04473 sec. 5.1; no "
               "recompute; full s x s attention, no causal discount)";
    if (config.kind == ModelKind::llama)
        return "6*B*s*(l*(2h^2 + 2h*h_kv + 3h*f) + h*V) + 12*B*l*s^2*h (Megatron-LM's convention, arXiv 2104.04473 "
               "sec. 5.1, for SwiGLU's three matrices and grouped-query K/V of width h_kv; no recompute; full s x s "
               "attention, no causal discount)";
    if (config.kind == ModelKind::gpt)
        return "72*B*s*l*h^2*(1 + s/(6h) + V/(12*l*h)) (Megatron-LM, arXiv 2104.04473 sec. 5.1, no recompute; "
               "full s x s attention, no causal discount)";
    return "6*B*l*h^2 (matmuls only: 2 forward + 4 backward per weight per sample)";
}

double recompute_flops_per_step(const ModelConfig& config, int global_batch, int seq_len, Recompute recompute) {
    if (recompute == Recompute::none || !config.has_sequence()) return 0.0;
    const double b = global_batch, s = seq_len, l = config.layers, h = config.hidden;
    const double core = 4.0 * b * l * s * s * h;
    if (recompute == Recompute::selective) return core;
    if (recompute == Recompute::selective_op) {
        // The k, output and up projections' forward products again (theory/layer_work.cpp's
        // op_level_recompute); the attention kernel's output is kept.
        const double kv = static_cast<double>(config.kv_heads) * (h / config.heads);
        return 2.0 * b * s * l * h * (kv + h + config.ffn_hidden);
    }
    if (config.kind == ModelKind::llama)
        return llama_layers_forward_flops(llama_shape(config), b, s) + 2.0 * b * s * moe_active_weight_delta(config);
    return 24.0 * b * s * l * h * h + core + 2.0 * b * s * moe_active_weight_delta(config);
}

ModelStates zero_theoretical_memory(std::size_t parameters, int dp, int zero_stage) {
    return zero_partitioned_states({4.0, 4.0, 8.0}, static_cast<double>(parameters), zero_stage, static_cast<double>(dp));
}

}  // namespace parbench
