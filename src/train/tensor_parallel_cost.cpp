#include "train/tensor_parallel_cost.hpp"

#include "train/models/llama_cost.hpp"

namespace parbench {
namespace {

constexpr double float_bytes = 4.0;

void add(std::map<std::string, CollectiveVolume>& traffic, const std::string& op, double calls, double elements) {
    CollectiveVolume& volume = traffic[op];
    volume.calls += calls;
    volume.bytes += calls * elements * float_bytes;
}

}  // namespace

std::map<std::string, CollectiveVolume> tensor_parallel_traffic_per_step(const ModelConfig& config, int seq_len,
                                                                         int microbatch_size, int microbatches,
                                                                         const TensorSplit& split,
                                                                         Recompute recompute) {
    std::map<std::string, CollectiveVolume> traffic;
    if (split.size == 1) return traffic;
    if (config.kind == ModelKind::llama)
        traffic = llama_tensor_parallel_traffic_per_step(config, seq_len, microbatch_size, microbatches, split);
    if (config.has_sequence() && recompute == Recompute::full) {
        const double n = static_cast<double>(microbatch_size) * seq_len * config.hidden;
        const double calls = 2.0 * microbatches * config.layers;
        if (split.sequence_parallel) {
            add(traffic, "allgather", calls, n);
            add(traffic, "reducescatter", calls, n);
        } else {
            add(traffic, "allreduce", calls, n);
        }
    }
    if (config.kind == ModelKind::llama) return traffic;
    const double m = microbatches;
    const double L = config.layers;
    const double h = config.hidden;
    if (config.kind == ModelKind::gpt) {
        const double r = static_cast<double>(microbatch_size) * seq_len;
        const double n = r * h;
        if (!split.sequence_parallel) {
            add(traffic, "allreduce", m * (4.0 * L + 2.0), n);
            add(traffic, "allreduce", m * 3.0, r);
            return traffic;
        }
        add(traffic, "allgather", m * (6.0 * L + 3.0), n);
        add(traffic, "reducescatter", m * (4.0 * L + 2.0), n);
        add(traffic, "allreduce", m * 3.0, r);
        add(traffic, "allreduce", m * L, 4.0 * h);
        add(traffic, "allreduce", m, 2.0 * h);
        return traffic;
    }
    const double r = microbatch_size;
    const double n = r * h;
    const int layers = config.layers;
    if (split.style == TensorParallelStyle::allgather) {
        add(traffic, "allgather", m * (L - 1.0), n);
        add(traffic, "reducescatter", m * (L - 1.0), n);
        add(traffic, "allreduce", m, r);
        return traffic;
    }
    const double row_layers = layers / 2;                   // layers 1, 3, 5, ...
    const double column_layers = layers - row_layers;       // layers 0, 2, 4, ...
    add(traffic, "allreduce", m * (row_layers + column_layers - 1.0), n);
    if (layers % 2 == 1) add(traffic, "allreduce", m, r);  // the loss over the last layer's slices
    return traffic;
}

ActivationFormula gpt_activation_bytes_per_layer(const ModelConfig& config, int seq_len, int microbatch_size,
                                                 const TensorSplit& split) {
    const double s = seq_len;
    const double b = microbatch_size;
    const double h = config.hidden;
    const double a = config.heads;
    const double t = split.size;
    const double sbh = s * b * h;
    const double scores = a * s / (h * t);  // the attention matrix, a·s²·b / t, in units of sbh
    ActivationFormula f;
    // Stored per layer, fp32: the inputs of both LayerNorms and of both residual adds
    // (LayerNorm outputs ln1, ln2; residual2, residual3: 4 sbh), LayerNorm mean and rstd
    // (4 sb), QKV (3 sbh / t), the attention output (sbh / t), the attention probabilities
    // (a s² b / t), the FFN's pre-GELU and post-GELU (8 sbh / t). No dropout masks, no
    // separate softmax input. SP divides the first two groups by t as well.
    if (split.sequence_parallel) {
        f.bytes = float_bytes * (sbh * (16.0 / t + scores) + 4.0 * s * b / t);
        f.formula = "sbh(64/t + 4as/(ht)) + 16sb/t  (fp32; what is stored, see docs/tensor.md)";
        f.paper_bytes = sbh * (34.0 / t + 5.0 * scores);
        f.paper_formula = "sbh(34/t + 5as/(ht))  (arXiv 2205.05198 table 2, TP + SP, 16-bit)";
    } else {
        f.bytes = float_bytes * (sbh * (4.0 + 12.0 / t + scores) + 4.0 * s * b);
        f.formula = split.size == 1 ? "sbh(64 + 4as/h) + 16sb  (fp32; what is stored, see docs/tensor.md)"
                                    : "sbh(16 + 48/t + 4as/(ht)) + 16sb  (fp32; what is stored, see docs/tensor.md)";
        f.paper_bytes = split.size == 1 ? sbh * (34.0 + 5.0 * scores) : sbh * (10.0 + 24.0 / t + 5.0 * scores);
        f.paper_formula = split.size == 1 ? "sbh(34 + 5as/h)  (arXiv 2205.05198 table 2, no parallelism, 16-bit)"
                                          : "sbh(10 + 24/t + 5as/(ht))  (arXiv 2205.05198 table 2, TP, 16-bit)";
    }
    return f;
}

ActivationFormula transformer_activation_bytes_per_layer(const ModelConfig& config, int seq_len,
                                                         int microbatch_size, const TensorSplit& split,
                                                         Recompute recompute) {
    const bool llama = config.kind == ModelKind::llama;
    ActivationFormula f = llama ? llama_activation_bytes_per_layer(config, seq_len, microbatch_size, split)
                                : gpt_activation_bytes_per_layer(config, seq_len, microbatch_size, split);
    const double s = seq_len;
    const double b = microbatch_size;
    const double h = config.hidden;
    const double t = split.size;
    const double sbh = s * b * h;
    const double region = split.sequence_parallel ? t : 1.0;
    if (recompute == Recompute::selective) {
        f.bytes -= float_bytes * config.heads * s * s * b / t;
        f.formula += "; selective recompute: minus the probabilities, 4as^2b/t";
        if (!llama) {
            f.paper_bytes = split.sequence_parallel ? 34.0 * sbh / t : (t == 1.0 ? 34.0 * sbh : sbh * (10.0 + 24.0 / t));
            f.paper_formula = split.sequence_parallel ? "34sbh/t  (arXiv 2205.05198 table 2, TP + SP + selective)"
                              : t == 1.0 ? "34sbh  (arXiv 2205.05198 table 2, selective recompute)"
                                         : "sbh(10 + 24/t)  (arXiv 2205.05198 table 2, TP + selective)";
        }
    } else if (recompute == Recompute::full) {
        f.bytes = float_bytes * sbh / region;
        f.formula = split.sequence_parallel ? "4sbh/t  (fp32; full recompute keeps only the layer's input)"
                                            : "4sbh  (fp32; full recompute keeps only the layer's input)";
        if (!llama) {
            f.paper_bytes = 2.0 * sbh / region;
            f.paper_formula = split.sequence_parallel ? "2sbh/t  (arXiv 2205.05198 sec. 5, full recompute, 16-bit)"
                                                      : "2sbh  (arXiv 2205.05198 sec. 5, full recompute, 16-bit)";
        }
    }
    return f;
}

}  // namespace parbench
