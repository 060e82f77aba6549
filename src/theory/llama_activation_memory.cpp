#include "theory/llama_activation_memory.hpp"

#include <stdexcept>

#include "theory/model_layout.hpp"

namespace parbench {

LayerActivationBytes llama_paper_layer_activation_bytes(const ModelConfig& config, int seq_len, int microbatch_size,
                                                        int tp, bool sp, Recompute recompute,
                                                        bool fp8_linear_inputs) {
    constexpr double half = 2.0;  // bytes of a 16-bit activation
    const double s = seq_len, b = microbatch_size, h = config.hidden, a = config.heads, f = config.ffn_hidden;
    const double t = tp;
    const double kv = static_cast<double>(config.kv_heads) * (h / a);
    const bool kv_split = llama_kv_heads_split(config, tp);
    const double kv_local = kv_split ? kv / t : kv;
    const double region = sp ? t : 1.0;  // the norms' and residuals' rows on this rank
    const std::string per_t = tp > 1 ? "/t" : "";
    const std::string kv_text = tp > 1 && kv_split ? "h_kv/t" : "h_kv";
    const std::string cite = "  (arXiv 2205.05198 sec. 4.1's derivation for Llama, 16-bit; theory/llama_activation_memory.hpp)";
    if (recompute == Recompute::full)
        return {half * s * b * h / region, std::string("2sbh") + (sp ? "/t" : "") + ", full recompute" + cite};
    if (recompute == Recompute::selective_op) {
        if (tp != 1 || fp8_linear_inputs)
            throw std::logic_error("llama_paper_layer_activation_bytes: selective-op is priced at tp 1 in 16 bits "
                                   "(theory/layout.cpp and plan refuse the rest)");
        return {half * s * b * (4.0 * h + kv + f),
                "8sbh + 2sb·h_kv + 2sbf, torchtitan's op-level selective checkpointing (the block's input and the "
                "outputs it saves; theory/llama_activation_memory.hpp)"};
    }
    // A projection's input at FP8's 1 byte counts half of a 16-bit item.
    const double kept = fp8_linear_inputs ? fp8_linear_input_bytes / half : 1.0;
    const double replicated = (2.0 + 2.0 * kept) * s * b * h / region;  // two norm inputs, two projection inputs
    // q after RoPE and the output projection's input; k and v; gate, up and down's input.
    const double split = (1.0 + kept) * s * b * h / t + 2.0 * s * b * kv_local + (2.0 + kept) * s * b * f / t;
    const double softmax = recompute == Recompute::selective ? 0.0 : a * s * s * b / t;
    const bool f8 = fp8_linear_inputs;
    std::string formula = std::string(f8 ? "6sbh" : "8sbh") + (sp ? "/t" : "") + (f8 ? " + 3sbh" : " + 4sbh") + per_t +
                          " + 4sb·" + kv_text + (f8 ? " + 5sbf" : " + 6sbf") + per_t +
                          (recompute == Recompute::selective ? "" : " + 2as²b" + per_t);
    if (recompute == Recompute::selective) formula += ", selective recompute";
    if (f8) formula += ", projections' inputs in FP8";
    return {half * (replicated + split + softmax), formula + cite};
}

LayerActivationBytes llama_op_recompute_rebuilt_bytes(const ModelConfig& config, int seq_len, int microbatch_size) {
    const double s = seq_len, b = microbatch_size, h = config.hidden, f = config.ffn_hidden;
    const double kv = static_cast<double>(config.kv_heads) * (h / config.heads);
    return {2.0 * s * b * (4.0 * h + kv + 2.0 * f),
            "8sbh + 2sb·h_kv + 4sbf, one layer's recompute under torchtitan's op-level policy "
            "(theory/llama_activation_memory.hpp)"};
}

}  // namespace parbench
