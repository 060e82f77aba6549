#include "theory/moe.hpp"

namespace parbench {

std::int64_t latent_attention_parameters(std::int64_t hidden, std::int64_t heads, const LatentAttentionShape& mla) {
    const std::int64_t qk_head = mla.nope_head_dim + mla.rope_head_dim;
    const std::int64_t queries = hidden * mla.q_lora_rank + mla.q_lora_rank + mla.q_lora_rank * heads * qk_head;
    const std::int64_t keys_values = hidden * (mla.kv_lora_rank + mla.rope_head_dim) + mla.kv_lora_rank +
                                     mla.kv_lora_rank * heads * (mla.nope_head_dim + mla.v_head_dim);
    return queries + keys_values + heads * mla.v_head_dim * hidden;
}

MoeParameterCount moe_parameter_count(const MoeShape& shape) {
    const LlamaParameterCount dense = llama_parameter_count(shape.dense);
    const std::int64_t h = shape.dense.hidden;
    const std::int64_t attention = shape.attention_per_layer > 0 ? shape.attention_per_layer : dense.attention_per_layer;
    const std::int64_t expert = shape.expert_matrices * h * shape.expert_hidden;
    const std::int64_t router = h * shape.experts;
    const std::int64_t dense_layers = shape.dense.layers - shape.moe_layers;
    const std::int64_t outside = dense.embedding + dense.final_norm + dense.output;
    const std::int64_t dense_layer = attention + dense.mlp_per_layer + dense.norms_per_layer;
    const std::int64_t moe_common = attention + dense.norms_per_layer + router;

    MoeParameterCount count;
    count.routed_experts = shape.moe_layers * shape.experts * expert;
    count.total = outside + dense_layers * dense_layer +
                  shape.moe_layers * (moe_common + (shape.experts + shape.shared_experts) * expert);
    count.active = outside + dense_layers * dense_layer +
                   shape.moe_layers * (moe_common + (shape.top_k + shape.shared_experts) * expert);
    return count;
}

double moe_alltoall_bytes(double tokens, double hidden, double top_k, int ep, double element_bytes,
                          double imbalance) {
    const double remote = ep > 0 ? static_cast<double>(ep - 1) / ep : 0.0;
    return tokens * hidden * top_k * remote * element_bytes * imbalance;
}

double moe_alltoall_buffer_bytes(double tokens, double hidden, double top_k, double element_bytes, double imbalance) {
    return tokens * hidden * top_k * element_bytes * imbalance;
}

double moe_mlp_activation_bytes(const MoeActivationShape& m) {
    const double t = m.tp, T = m.tokens, received = T * m.top_k * m.imbalance;
    return 4.0 * T * m.experts + 2.0 * received * m.hidden + 6.0 * (received + T * m.shared_experts) * m.expert_hidden / t +
           2.0 * T * m.top_k * m.hidden;
}

double moe_mlp_forward_flops_per_token(double hidden, double experts, double top_k, double shared_experts,
                                       double expert_hidden, double expert_matrices) {
    return 2.0 * hidden * experts + (top_k + shared_experts) * 2.0 * expert_matrices * hidden * expert_hidden;
}

}  // namespace parbench
