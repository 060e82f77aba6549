#include "theory/llama_activation_memory.hpp"

#include "theory/model_layout.hpp"

namespace parbench {

LayerActivationBytes llama_paper_layer_activation_bytes(const ModelConfig& config, int seq_len, int microbatch_size,
                                                        int tp, bool sp, Recompute recompute) {
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
    const double replicated = 4.0 * s * b * h / region;  // two norm inputs, two projection inputs
    const double split = 2.0 * s * b * h / t + 2.0 * s * b * kv_local + 3.0 * s * b * f / t;
    const double softmax = recompute == Recompute::selective ? 0.0 : a * s * s * b / t;
    std::string formula = std::string(sp ? "8sbh/t" : "8sbh") + " + 4sbh" + per_t + " + 4sb·" + kv_text + " + 6sbf" +
                          per_t + (recompute == Recompute::selective ? "" : " + 2as²b" + per_t);
    if (recompute == Recompute::selective) formula += ", selective recompute";
    return {half * (replicated + split + softmax), formula + cite};
}

}  // namespace parbench
