#include "theory/moe_work.hpp"

#include <algorithm>

#include "theory/llama_formulas.hpp"
#include "theory/model_flops.hpp"

namespace parbench {
namespace {

// The backward's element-wise work moves 1.5 x the forward's bytes (theory/layer_work.hpp's
// convention: it reads the saved input and the incoming gradient and writes the outgoing one).
constexpr double backward_memory_factor = 1.5;

void add_linear(LayerWork& work, const std::string& name, double tokens, double in, double out, double count,
                double e) {
    work.forward.gemms.push_back({name, tokens, out, in, count, e});
    work.input_grad.gemms.push_back({name + " dx", tokens, in, out, count, e});
    work.weight_grad.gemms.push_back({name + " dW", in, out, tokens, count, e});
}

void drop_empty_gemms(PassWork& pass) {
    std::erase_if(pass.gemms, [](const Gemm& g) { return g.flops() <= 0.0; });
}

}  // namespace

ModelConfig dense_skeleton(const ModelConfig& config) {
    ModelConfig skeleton = config;
    skeleton.moe = std::nullopt;
    skeleton.mla = std::nullopt;
    return skeleton;
}

bool is_moe_layer(const ModelConfig& config, int layer) {
    return config.moe && layer >= config.moe->first_dense && (layer - config.moe->first_dense) % config.moe->every == 0;
}

int moe_layers_in(const ModelConfig& config, int first, int end) {
    int count = 0;
    for (int layer = first; layer < end; ++layer) count += is_moe_layer(config, layer);
    return count;
}

MoeLayerParameters moe_layer_parameters(const ModelConfig& config) {
    MoeLayerParameters p;
    if (config.moe) {
        const double h = config.hidden, expert = config.moe->matrices_per_expert() * h * config.moe->expert_hidden;
        // The skeleton's MLP weights: Llama's SwiGLU 3·h·f, GPT's h -> 4h -> h.
        p.dense_mlp = config.kind == ModelKind::llama ? 3.0 * h * config.ffn_hidden : 8.0 * h * h;
        p.router = h * config.moe->experts;
        p.shared = config.moe->shared_experts * expert;
        p.routed = config.moe->experts * expert;
    }
    if (config.mla)
        p.attention_delta = static_cast<double>(latent_attention_parameters(config.hidden, config.heads, *config.mla)) -
                            static_cast<double>(llama_parameter_count(llama_shape(dense_skeleton(config))).attention_per_layer);
    return p;
}

LayerWork moe_layer_work(const LayerWorkShape& shape, AttentionKind attention, Recompute recompute, int ep,
                         double imbalance) {
    const ModelConfig& model = shape.model;
    LayerWorkShape attention_only = shape;
    attention_only.model = dense_skeleton(model);
    attention_only.mlp = false;  // the skeleton's MLP GEMMs become empty, its SwiGLU / GELU traffic 0
    LayerWork work = transformer_layer_work(attention_only, attention, recompute);
    for (PassWork* pass : {&work.forward, &work.input_grad, &work.weight_grad, &work.recompute}) drop_empty_gemms(*pass);

    const ModelConfig::Moe& moe = *model.moe;
    const double t = shape.tp, h = model.hidden, e = shape.element_bytes, f = moe.expert_hidden;
    const double tokens = shape.micro * shape.seq;
    const double local_experts = static_cast<double>(moe.experts) / ep;
    const double received = tokens * moe.top_k * imbalance;  // copies the busiest rank's experts run
    const double per_expert = received / local_experts;
    add_linear(work, "router", tokens, h, moe.experts, 1, e);
    // A SwiGLU expert's gate and up matrices, a GELU expert's one up matrix; then down.
    const double up = moe.matrices_per_expert() - 1.0;
    add_linear(work, "expert gate/up", per_expert, h, up * f / t, local_experts, e);
    add_linear(work, "expert down", per_expert, f / t, h, local_experts, e);
    if (moe.shared_experts > 0) {
        add_linear(work, "shared experts gate/up", tokens, h, up * moe.shared_experts * f / t, 1, e);
        add_linear(work, "shared experts down", tokens, moe.shared_experts * f / t, h, 1, e);
    }
    double memory = 2.0 * tokens * moe.experts * 4.0;                // scores (fp32): read, write
    memory += 2.0 * (2.0 * tokens * moe.top_k * h * e);              // permute and unpermute: read, write
    // SwiGLU: read gate and up, write; GELU: read, write.
    memory += (up + 1.0) * (received + tokens * moe.shared_experts) * f / t * e;
    memory += (tokens * moe.top_k * h + tokens * h) * e;             // weighted combine: read k copies, write 1
    work.forward.memory_bytes += memory;
    work.input_grad.memory_bytes += backward_memory_factor * memory;
    if (recompute == Recompute::full) work.recompute = work.forward;
    return work;
}

MoePassParts split_moe_pass(const PassWork& pass) {
    MoePassParts parts;
    const auto starts = [](const std::string& name, const char* prefix) { return name.rfind(prefix, 0) == 0; };
    for (const Gemm& gemm : pass.gemms) {
        // moe_layer_work's names: "expert gate/up", "expert down" (routed), "shared experts ..." (+ " dx", " dW").
        PassWork& part = starts(gemm.name, "expert ") ? parts.routed
                         : starts(gemm.name, "shared experts ") ? parts.shared
                                                                : parts.rest;
        part.gemms.push_back(gemm);
    }
    parts.rest.memory_bytes = pass.memory_bytes;
    return parts;
}

namespace {

// Per token, the forward FLOPs an MoE layer runs beyond its skeleton's SwiGLU (2 per parameter).
double moe_layer_extra_forward_flops(const ModelConfig& config) {
    if (!config.moe) return 0.0;
    const MoeLayerParameters p = moe_layer_parameters(config);
    return moe_mlp_forward_flops_per_token(config.hidden, config.moe->experts, config.moe->top_k,
                                           config.moe->shared_experts, config.moe->expert_hidden,
                                           config.moe->matrices_per_expert()) -
           2.0 * p.dense_mlp;
}

}  // namespace

double moe_model_flops_per_step(const ModelConfig& config, int global_batch, int seq_len) {
    const double tokens = static_cast<double>(global_batch) * seq_len;
    // Forward + backward = 3 x forward; MLA's projections 2 FLOPs per parameter each way.
    return model_flops_per_step(dense_skeleton(config), global_batch, seq_len) +
           3.0 * tokens * config.moe_layer_count() * moe_layer_extra_forward_flops(config) +
           6.0 * tokens * config.layers * moe_layer_parameters(config).attention_delta;
}

double moe_recompute_flops_per_step(const ModelConfig& config, int global_batch, int seq_len, Recompute recompute) {
    const double dense = recompute_flops_per_step(dense_skeleton(config), global_batch, seq_len, recompute);
    if (recompute != Recompute::full) return dense;  // selective repeats the attention core only
    const double tokens = static_cast<double>(global_batch) * seq_len;
    return dense + tokens * config.moe_layer_count() * moe_layer_extra_forward_flops(config) +
           2.0 * tokens * config.layers * moe_layer_parameters(config).attention_delta;
}

}  // namespace parbench
