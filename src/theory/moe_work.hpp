// A mixture-of-experts model as plan lays it out: the dense formulas (parameter layout, layer
// work, activation memory, FLOPs, traffic) take its dense skeleton, the same config without
// "moe" and "mla" (every layer a dense Llama block of width ffn_hidden, grouped-query or
// multi-head attention of `heads` x hidden/heads), and these functions say which layers are
// MoE and what such a layer costs instead (theory/moe.hpp's formulas). Approximations, which
// plan's output and docs/moe.md repeat:
// - DeepSeek-V3's latent attention (MLA) is counted exactly in parameters (and so in states,
//   optimizer time and the 6N FLOPs of its projections), but its compute, activations and
//   attention core are the skeleton's attention of `heads` heads of width hidden/heads.
// - The multi-token-prediction module (DeepSeek-V3's MTP, 14B) is not part of the model.
// - Routed experts on one rank run as E/ep GEMMs of the busiest rank's tokens per expert
//   (a grouped GEMM's efficiency is that of its parts on the GEMM curve).
#pragma once

#include "theory/layer_work.hpp"
#include "theory/model_config.hpp"

namespace parbench {

ModelConfig dense_skeleton(const ModelConfig& config);
// Layer `layer` (0-based) is an MoE layer: from first_dense on, every `every`-th.
bool is_moe_layer(const ModelConfig& config, int layer);
int moe_layers_in(const ModelConfig& config, int first, int end);

// Per layer, what the MoE config holds beside or instead of its skeleton's parameters.
struct MoeLayerParameters {
    double dense_mlp = 0;        // the skeleton's MLP weights (Llama 3·h·f, GPT 8·h²), which an MoE layer does not have
    double router = 0;           // h·E, replicated over the tensor-parallel ranks
    double shared = 0;           // S·m·h·f_e (m = 3 SwiGLU, 2 GELU), split over tp
    double routed = 0;           // E·m·h·f_e, split over ep and tp
    double attention_delta = 0;  // every layer: MLA's parameters less the skeleton's attention's (0 without mla)
};
MoeLayerParameters moe_layer_parameters(const ModelConfig& config);

// One MoE layer's work on one tensor-parallel rank of the busiest expert-parallel rank, one
// micro-batch: the skeleton's attention block, then the router (T x h x E), the routed
// experts as E/ep GEMMs of T·k·imbalance·ep/E tokens each (gate/up h -> 2f_e/t, down f_e/t -> h),
// the shared experts as one SwiGLU of width S·f_e/t, and the element-wise traffic of routing
// (the scores, the permutation and its inverse, SwiGLU, the weighted combine). shape.model is
// the MoE config.
LayerWork moe_layer_work(const LayerWorkShape& shape, AttentionKind attention, Recompute recompute, int ep,
                         double imbalance);

// One pass of an MoE layer (moe_layer_work's forward, input_grad, ...) cut where train's MoE layer
// posts its exchanges (train/moe/moe_layer.cpp): the routed experts' GEMMs run between the
// dispatch and the combine; the shared experts' after the combine in forward (after the dispatch's
// mirror in backward); the rest (attention, router, element-wise routing traffic) before the
// dispatch in forward and after it in backward.
struct MoePassParts {
    PassWork routed, shared, rest;
};
MoePassParts split_moe_pass(const PassWork& pass);

// Model FLOPs per step on the active parameters: the skeleton's (theory/model_flops.hpp) with
// each MoE layer's SwiGLU replaced by its router and k + S experts and MLA's projections by
// their parameter count (6 FLOPs per parameter and token); the attention core stays the skeleton's.
double moe_model_flops_per_step(const ModelConfig& config, int global_batch, int seq_len);
double moe_recompute_flops_per_step(const ModelConfig& config, int global_batch, int seq_len, Recompute recompute);

}  // namespace parbench
