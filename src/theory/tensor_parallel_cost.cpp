#include "theory/tensor_parallel_cost.hpp"

#include "theory/activation_memory.hpp"
#include "theory/context_parallel.hpp"
#include "theory/llama_activation_memory.hpp"
#include "theory/llama_cost.hpp"

namespace parbench {
namespace {

constexpr double float_bytes = 4.0;

// 2205.05198 table 2's bytes for a GPT layer: theory/activation_memory.hpp's one copy of it.
double table2_bytes(const ModelConfig& config, int seq_len, int microbatch_size, const TensorSplit& split,
                    Recompute recompute) {
    const LayerActivationShape shape{static_cast<double>(seq_len), static_cast<double>(microbatch_size),
                                     static_cast<double>(config.hidden), static_cast<double>(config.heads), split.size,
                                     split.sequence_parallel};
    return paper_layer_activation_bytes(shape, recompute);
}

}  // namespace

std::map<std::string, CollectiveVolume> tensor_parallel_traffic_per_step(const ModelConfig& config, int seq_len,
                                                                         int microbatch_size, int microbatches,
                                                                         const TensorSplit& split,
                                                                         Recompute recompute) {
    return tensor_parallel_traffic(config, seq_len, microbatch_size, microbatches, split, whole_model_share(config),
                                   recompute);
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
        f.paper_bytes = table2_bytes(config, seq_len, microbatch_size, split, Recompute::none);
        f.paper_formula = "sbh(34/t + 5as/(ht))  (arXiv 2205.05198 table 2, TP + SP, 16-bit)";
    } else {
        f.bytes = float_bytes * (sbh * (4.0 + 12.0 / t + scores) + 4.0 * s * b);
        f.formula = split.size == 1 ? "sbh(64 + 4as/h) + 16sb  (fp32; what is stored, see docs/tensor.md)"
                                    : "sbh(16 + 48/t + 4as/(ht)) + 16sb  (fp32; what is stored, see docs/tensor.md)";
        f.paper_bytes = table2_bytes(config, seq_len, microbatch_size, split, Recompute::none);
        f.paper_formula = split.size == 1 ? "sbh(34 + 5as/h)  (arXiv 2205.05198 table 2, no parallelism, 16-bit)"
                                          : "sbh(10 + 24/t + 5as/(ht))  (arXiv 2205.05198 table 2, TP, 16-bit)";
    }
    return f;
}

namespace {

// Under context parallelism: s = seq_len / c tokens per rank, ContextAttention's saved state in
// place of the probabilities (none, selective), or the layer input alone (full). The paper's
// value (GPT) is theory/activation_memory.hpp's s' = s/c form of table 2.
ActivationFormula context_parallel_activation_bytes_per_layer(const ModelConfig& config, int seq_len,
                                                              int microbatch_size, const TensorSplit& split,
                                                              Recompute recompute, const ContextSplit& context) {
    const int local_seq = seq_len / context.size;
    const double s = local_seq;
    const double b = microbatch_size;
    const double t = split.size;
    const double region = split.sequence_parallel ? t : 1.0;
    const std::string per_rank = "s = seq/c = " + std::to_string(local_seq) + " tokens per cp rank";
    const bool llama = config.kind == ModelKind::llama;
    const LayerActivationShape paper{static_cast<double>(seq_len), b, static_cast<double>(config.hidden),
                                     static_cast<double>(config.heads), split.size, split.sequence_parallel,
                                     context.size};
    ActivationFormula f = llama ? llama_activation_bytes_per_layer(config, local_seq, microbatch_size, split)
                                : gpt_activation_bytes_per_layer(config, local_seq, microbatch_size, split);
    if (!llama) {
        f.paper_bytes = paper_layer_activation_bytes(paper, recompute);
        f.paper_formula = paper_layer_activation_formula(split.size > 1, split.sequence_parallel, recompute, context.size);
    }
    if (recompute == Recompute::full) {
        f.bytes = float_bytes * s * b * config.hidden / region;
        f.formula = std::string(split.sequence_parallel ? "4sbh/t" : "4sbh") +
                    "  (fp32; full recompute keeps only the layer's input; " + per_rank + ")";
        return f;
    }
    const double saved = static_cast<double>(
        context_attention_floats(context_local_gqa_shape(config, microbatch_size, local_seq, split), context, seq_len)
            .saved);
    f.bytes += float_bytes * (saved - config.heads * s * s * b / t);
    f.formula += "; context parallel (" + context_style_name(context.style) + "): " + per_rank +
                 ", and ContextAttention's saved state (" + std::to_string(static_cast<long long>(saved)) +
                 " floats) in place of the probabilities as^2b/t" +
                 (recompute == Recompute::selective ? ", which selective recompute leaves as they are" : "");
    return f;
}

}  // namespace

ActivationFormula transformer_activation_bytes_per_layer(const ModelConfig& config, int seq_len,
                                                         int microbatch_size, const TensorSplit& split,
                                                         Recompute recompute, const ContextSplit& context,
                                                         AttentionKind attention) {
    if (context.size > 1)
        return context_parallel_activation_bytes_per_layer(config, seq_len, microbatch_size, split, recompute, context);
    if (attention == AttentionKind::flash && recompute != Recompute::full) {
        // The probabilities, all that selective recompute drops, give way to the lse rows; the
        // paper's value is the selective one (flash attention keeps no s x s tensor, as
        // plan/layout_plan.cpp counts it).
        ActivationFormula f =
            transformer_activation_bytes_per_layer(config, seq_len, microbatch_size, split, Recompute::selective);
        const double s = seq_len, b = microbatch_size, t = split.size;
        f.bytes += float_bytes * config.heads * s * b / t;
        f.formula = transformer_activation_bytes_per_layer(config, seq_len, microbatch_size, split).formula +
                    "; block attention: the log-sum-exp rows, 4asb/t, in place of the probabilities, 4as^2b/t";
        return f;
    }
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
            f.paper_bytes = table2_bytes(config, seq_len, microbatch_size, split, Recompute::selective);
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
    if (llama) {
        const LayerActivationBytes paper = llama_paper_layer_activation_bytes(
            config, seq_len, microbatch_size, split.size, split.sequence_parallel, recompute);
        f.paper_bytes = paper.bytes;
        f.paper_formula = paper.formula;
    }
    return f;
}

}  // namespace parbench
