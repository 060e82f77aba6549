// Closed forms for a Llama-style decoder (Touvron et al., arXiv 2302.13971; Llama 3, arXiv
// 2407.21783): RMSNorm, a SwiGLU MLP of three matrices, rotary positions (no parameters),
// grouped-query attention with kv_heads <= heads, and an output projection untied from the
// input embedding. Shared by `parbench train` (MFU, the model's parameter layout is checked
// against it) and `parbench plan` (memory and FLOPs without running anything), so this file
// knows nothing about configs or ranks: plain numbers in, plain numbers out.
#pragma once

#include <cstdint>

namespace parbench {

struct LlamaShape {
    std::int64_t layers = 0;
    std::int64_t hidden = 0;      // h
    std::int64_t heads = 0;       // query heads a; head size d = h / a
    std::int64_t kv_heads = 0;    // key/value heads g (a % g == 0); g = a is plain multi-head attention
    std::int64_t ffn_hidden = 0;  // f, the width of the SwiGLU gate and up projections
    std::int64_t vocab = 0;       // V
    std::int64_t head_dim() const { return hidden / heads; }
    std::int64_t kv_width() const { return kv_heads * head_dim(); }  // h_kv = g · d
};

// Parameters by part. No biases anywhere (Llama has none); RMSNorm has one gain vector.
struct LlamaParameterCount {
    std::int64_t embedding = 0;          // V · h
    std::int64_t attention_per_layer = 0;  // Wq h·h + Wk h·h_kv + Wv h·h_kv + Wo h·h
    std::int64_t mlp_per_layer = 0;      // W_gate h·f + W_up h·f + W_down f·h
    std::int64_t norms_per_layer = 0;    // 2 · h (before attention and before the MLP)
    std::int64_t final_norm = 0;         // h
    std::int64_t output = 0;             // V · h, untied
    std::int64_t per_layer() const { return attention_per_layer + mlp_per_layer + norms_per_layer; }
    std::int64_t total(std::int64_t layers) const { return embedding + layers * per_layer() + final_norm + output; }
};
LlamaParameterCount llama_parameter_count(const LlamaShape& shape);
std::int64_t llama_total_parameters(const LlamaShape& shape);

// Model FLOPs of one training step (forward + backward = 3 x forward, no recompute), in the
// convention of Megatron-LM (arXiv 2104.04473 sec. 5.1): 2 FLOPs per multiply-add, matmuls
// only (norms, SwiGLU's product, rotary and softmax are not counted), and the attention
// scores and weighted sum over the full s x s matrix (no causal discount). Per layer and
// token the forward does 2(2h² + 2h·h_kv + 3hf) for the weights and 4sh for QKᵀ and AV; the
// output projection adds 2hV per token:
//     F = 6·B·s·[l·(2h² + 2h·h_kv + 3hf) + hV] + 12·B·l·s²·h
// With h_kv = h and a two-matrix MLP of f = 4h this is the GPT formula 72Bslh²(1 + s/6h + V/12lh).
double llama_model_flops(const LlamaShape& shape, double batch, double seq);
// The forward matmul FLOPs of the attention core alone (QKᵀ and AV: 4·B·l·s²·h), which
// selective recompute repeats in the backward (arXiv 2205.05198 sec. 5), and of one whole
// layer stack (what full recompute repeats): hardware FLOPs add these to the model FLOPs.
double llama_attention_core_forward_flops(const LlamaShape& shape, double batch, double seq);
double llama_layers_forward_flops(const LlamaShape& shape, double batch, double seq);

}  // namespace parbench
