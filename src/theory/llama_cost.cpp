#include "theory/llama_cost.hpp"

#include "theory/model_layout.hpp"

namespace parbench {
namespace {

constexpr double float_bytes = 4.0;

void add(std::map<std::string, CollectiveVolume>& traffic, const std::string& op, double calls, double elements) {
    CollectiveVolume& volume = traffic[op];
    volume.calls += calls;
    volume.bytes += calls * elements * float_bytes;
}

double kv_width(const ModelConfig& config) {
    return static_cast<double>(config.kv_heads) * (config.hidden / config.heads);
}

}  // namespace

std::map<std::string, CollectiveVolume> llama_tensor_parallel_traffic_per_step(const ModelConfig& config,
                                                                               int seq_len, int microbatch_size,
                                                                               int microbatches,
                                                                               const TensorSplit& split) {
    std::map<std::string, CollectiveVolume> traffic;
    if (split.size == 1) return traffic;
    const double m = microbatches;
    const double L = config.layers;
    const double h = config.hidden;
    const double r = static_cast<double>(microbatch_size) * seq_len;
    const double n = r * h;
    if (split.sequence_parallel) {
        add(traffic, "allgather", m * (6.0 * L + 3.0), n);
        add(traffic, "reducescatter", m * (4.0 * L + 2.0), n);
        add(traffic, "allreduce", m * 3.0, r);
        add(traffic, "allreduce", m * L, 2.0 * h);
        add(traffic, "allreduce", m, h);
    } else {
        add(traffic, "allreduce", m * (4.0 * L + 2.0), n);
        add(traffic, "allreduce", m * 3.0, r);
    }
    if (!llama_kv_heads_split(config, split.size)) add(traffic, "allreduce", m * L, 2.0 * kv_width(config) * h);
    return traffic;
}

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
