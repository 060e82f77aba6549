#include "theory/llama_cost.hpp"

#include "theory/model_layout.hpp"

namespace parbench {
namespace {

constexpr double float_bytes = 4.0;

double kv_width(const ModelConfig& config) {
    return static_cast<double>(config.kv_heads) * (config.hidden / config.heads);
}

}  // namespace

ActivationFormula llama_activation_bytes_per_layer(const ModelConfig& config, int seq_len, int microbatch_size,
                                                   const TensorSplit& split) {
    const double s = seq_len;
    const double b = microbatch_size;
    const double h = config.hidden;
    const double a = config.heads;
    const double f = config.ffn_hidden;
    const double t = split.size;
    const double kv_local = llama_kv_heads_split(config, split.size) ? kv_width(config) / t : kv_width(config);
    const double region = split.sequence_parallel ? t : 1.0;  // the norm / residual regions' split
    ActivationFormula formula;
    formula.bytes = float_bytes * ((4.0 * s * b * h + 2.0 * s * b) / region + 2.0 * s * b * h / t +
                                   2.0 * s * b * kv_local + a * s * s * b / t + 3.0 * s * b * f / t);
    formula.formula = std::string(split.sequence_parallel ? "4((4sbh + 2sb)/t" : "4(4sbh + 2sb") +
                      " + 2sbh/t + 2sb*h_kv' + as^2b/t + 3sbf/t)  (fp32; h_kv' = h_kv/t when tp divides kv_heads, "
                      "else h_kv; what models/llama.cpp stores)";
    return formula;
}

}  // namespace parbench
