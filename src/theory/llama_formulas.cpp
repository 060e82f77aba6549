#include "theory/llama_formulas.hpp"

namespace parbench {

LlamaParameterCount llama_parameter_count(const LlamaShape& shape) {
    const std::int64_t h = shape.hidden;
    const std::int64_t kv = shape.kv_width();
    const std::int64_t f = shape.ffn_hidden;
    LlamaParameterCount count;
    count.embedding = shape.vocab * h;
    count.attention_per_layer = 2 * h * h + 2 * h * kv;
    count.mlp_per_layer = 3 * h * f;
    count.norms_per_layer = 2 * h;
    count.final_norm = h;
    count.output = shape.vocab * h;
    return count;
}

std::int64_t llama_total_parameters(const LlamaShape& shape) {
    return llama_parameter_count(shape).total(shape.layers);
}

double llama_attention_core_forward_flops(const LlamaShape& shape, double batch, double seq) {
    return 4.0 * batch * static_cast<double>(shape.layers) * seq * seq * static_cast<double>(shape.hidden);
}

double llama_layers_forward_flops(const LlamaShape& shape, double batch, double seq) {
    const double h = static_cast<double>(shape.hidden);
    const double kv = static_cast<double>(shape.kv_width());
    const double f = static_cast<double>(shape.ffn_hidden);
    const double weights = 2.0 * batch * seq * static_cast<double>(shape.layers) * (2.0 * h * h + 2.0 * h * kv + 3.0 * h * f);
    return weights + llama_attention_core_forward_flops(shape, batch, seq);
}

double llama_model_flops(const LlamaShape& shape, double batch, double seq) {
    const double output = 2.0 * batch * seq * static_cast<double>(shape.hidden) * static_cast<double>(shape.vocab);
    return 3.0 * (llama_layers_forward_flops(shape, batch, seq) + output);
}

}  // namespace parbench
