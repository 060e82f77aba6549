#include "theory/activation_memory.hpp"

#include <stdexcept>

#include "core/error.hpp"

namespace parbench {

Recompute parse_recompute(const std::string& name) {
    if (name == "none") return Recompute::none;
    if (name == "selective") return Recompute::selective;
    if (name == "full") return Recompute::full;
    if (name == "selective-op") return Recompute::selective_op;
    throw UsageError("--recompute '" + name + "': use none, selective (the attention core), full (each layer) or "
                     "selective-op (torchtitan's op-level policy, plan only)");
}

std::string recompute_name(Recompute recompute) {
    switch (recompute) {
        case Recompute::none: return "none";
        case Recompute::selective: return "selective";
        case Recompute::full: return "full";
        case Recompute::selective_op: return "selective-op";
    }
    return "unknown";
}

double paper_layer_activation_bytes(const LayerActivationShape& x, Recompute recompute) {
    if (recompute == Recompute::selective_op)
        throw std::logic_error("paper_layer_activation_bytes: selective-op is priced for Llama layers only "
                               "(theory/llama_activation_memory.hpp; theory/layout.cpp refuses the rest)");
    // Per token: this rank's s/c tokens; the attention term's s stays whole (see the header).
    const double sbh = x.seq / x.cp * x.microbatch * x.hidden;
    const double t = x.tp;
    if (recompute == Recompute::full) return 2.0 * sbh;
    const double attention = recompute == Recompute::selective ? 0.0 : 5.0 * x.heads * x.seq / (x.hidden * t);
    // The linear layers' inputs: 4 of the replicated 10 (QKV's, the first MLP matrix's) and 10 of
    // the split 24 (the projection's, the second MLP matrix's), at 2 bytes or FP8's 1.
    const double kept = x.fp8_linear_inputs ? fp8_linear_input_bytes / 2.0 : 1.0;
    const double replicated = 6.0 + 4.0 * kept, split = 14.0 + 10.0 * kept;
    if (x.tp == 1) return sbh * (replicated + split + attention);
    if (x.sp) return sbh * ((replicated + split) / t + attention);
    return sbh * (replicated + split / t + attention);
}

std::string paper_layer_activation_formula(bool tensor_parallel, bool sp, Recompute recompute, int cp,
                                          bool fp8_linear_inputs) {
    const std::string cite = cp > 1 ? " (arXiv 2205.05198 table 2; context parallel: s' = s/" + std::to_string(cp) +
                                          " tokens per rank, the attention term's s whole)"
                                    : " (arXiv 2205.05198 table 2)";
    const std::string sbh = cp > 1 ? "s'bh" : "sbh";
    if (recompute == Recompute::full) return "2" + sbh + ", full recompute" + cite;
    const std::string fp8 = fp8_linear_inputs ? ", linear layers' inputs in FP8" : "";
    const bool f = fp8_linear_inputs;
    const std::string attention = recompute == Recompute::selective ? "" : tensor_parallel ? " + 5as/(ht)" : " + 5as/h";
    const std::string suffix = recompute == Recompute::selective ? ", selective recompute" : "";
    if (!tensor_parallel) return sbh + (f ? "(27" : "(34") + attention + ")" + suffix + fp8 + cite;
    if (sp) return sbh + (f ? "(27/t" : "(34/t") + attention + "), tensor + sequence parallel" + suffix + fp8 + cite;
    return sbh + (f ? "(8 + 19/t" : "(10 + 24/t") + attention + "), tensor parallel" + suffix + fp8 + cite;
}

}  // namespace parbench
