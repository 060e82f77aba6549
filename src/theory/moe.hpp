// Closed forms for a mixture-of-experts decoder (Llama-style blocks whose SwiGLU MLP is, in
// the MoE layers, a router and a set of expert MLPs): parameters in total and active per
// token, the all-to-all bytes of expert parallelism, and the expert states per rank. Plain
// numbers in and out, like llama_formulas.hpp; the config's fields become these shapes in
// model_config.cpp.
//
// An MoE layer (Shazeer et al., arXiv 1701.06538; Switch, arXiv 2101.03961; Mixtral,
// arXiv 2401.04088; DeepSeek-V3, arXiv 2412.19437 sec. 2.1.2) holds a router W_r (h x E, no
// bias) and E routed experts plus S shared experts, each a SwiGLU MLP of width f_e
// (3·h·f_e; a GELU expert, GPT's form without biases, has 2·h·f_e: m matrices below). Each
// token runs its top-k routed experts and every shared expert, so
//     total  per MoE layer = h·E + (E + S)·m·h·f_e
//     active per MoE layer = h·E + (k + S)·m·h·f_e
// (the router runs for every token, so it counts as active). Dense layers keep 3·h·f.
#pragma once

#include <cstdint>

#include "theory/llama_formulas.hpp"

namespace parbench {

// DeepSeek-V2/V3's multi-head latent attention (arXiv 2405.04434 sec. 2.1), for counting its
// parameters: queries through a rank-q_lora bottleneck, keys and values through a shared
// rank-kv_lora latent plus one decoupled rotary key of rope_dim per token:
//     h·q_lora + q_lora (norm) + q_lora·a·(nope + rope)      queries
//   + h·(kv_lora + rope) + kv_lora (norm) + kv_lora·a·(nope + v)   keys and values
//   + a·v·h                                                   output
struct LatentAttentionShape {
    std::int64_t q_lora_rank = 0;
    std::int64_t kv_lora_rank = 0;
    std::int64_t nope_head_dim = 0;  // the part of each query/key head without rotary positions
    std::int64_t rope_head_dim = 0;
    std::int64_t v_head_dim = 0;
};
std::int64_t latent_attention_parameters(std::int64_t hidden, std::int64_t heads, const LatentAttentionShape& mla);

struct MoeShape {
    LlamaShape dense;                   // the blocks' shape; ffn_hidden is the dense layers' MLP width
    std::int64_t moe_layers = 0;        // layers whose MLP is an MoE
    std::int64_t experts = 0;           // E, routed experts per MoE layer
    std::int64_t top_k = 0;             // k, routed experts per token
    std::int64_t shared_experts = 0;    // S, run for every token
    std::int64_t expert_hidden = 0;     // f_e
    std::int64_t attention_per_layer = 0;  // 0: grouped-query attention's; else (MLA) this count
    std::int64_t expert_matrices = 3;      // h x f_e matrices per expert: 3 SwiGLU, 2 GELU
};

struct MoeParameterCount {
    std::int64_t total = 0;           // every parameter
    std::int64_t active = 0;          // those one token runs through (embedding and output included)
    std::int64_t routed_experts = 0;  // the routed experts' parameters, the part expert parallelism shards
};
MoeParameterCount moe_parameter_count(const MoeShape& shape);

// One all-to-all of an MoE layer on one rank of an expert-parallel group of ep ranks, in
// bytes: each of `tokens` tokens goes to k experts, a fraction (ep-1)/ep of them on other
// ranks on average, each copy `hidden` elements; `imbalance` (max/mean received, 1 when
// balanced, what parbench alltoallv measures under --skew) scales the busiest rank's share.
// The dispatch sends this much and the combine brings as much back; the backward pass
// repeats both (the gradients travel the same routes), so a layer moves 4 times this per step.
double moe_alltoall_bytes(double tokens, double hidden, double top_k, int ep, double element_bytes,
                          double imbalance);

// One MoE layer per step moves moe_alltoall_bytes this many times: dispatch and combine in the
// forward, their mirror images (the gradients back along the same routes) in the backward.
inline constexpr int moe_alltoalls_per_layer = 4;

// The all-to-all's time is set by its busiest receiver, `imbalance` times the mean: the buffer
// that rank receives, in the nccl-tests convention parbench alltoall(v) reports (the whole
// per-rank buffer, its own share included): tokens x hidden x top_k x element_bytes x imbalance.
double moe_alltoall_buffer_bytes(double tokens, double hidden, double top_k, double element_bytes, double imbalance);

// Activation bytes one MoE layer's MLP part keeps for its backward, per micro-batch, on the
// busiest expert-parallel rank, in 16 bits as theory/llama_activation_memory.hpp counts the
// dense layer's (arXiv 2205.05198 sec. 4.1's method, item by item; T tokens on the rank, ρ the
// imbalance, t the tensor-parallel ranks that split each expert's width, Megatron-core's
// expert tensor parallelism equal to tp):
//     router probabilities, fp32 (softmax's or the sigmoid's backward)   4·T·E
//     permuted tokens, the routed experts' input (received copies)        2·T·k·ρ·h
//     each received copy's gate, up and silu(gate)·up                    6·T·k·ρ·f_e/t
//     the shared experts' gate, up and product (input: the norm output)  6·T·S·f_e/t
//     the experts' outputs back on the token's rank (the combine's
//     weights need them for the router's gradient)                       2·T·k·h
// These replace the dense MLP's 6·T·f/t; the norm output (the router's and shared experts'
// input) stays counted in the dense part. Full recompute keeps the layer input only, as dense.
struct MoeActivationShape {
    double tokens = 0;  // T = s·b (s/cp under context parallelism) on this rank
    double hidden = 0;
    double experts = 0;
    double top_k = 0;
    double shared_experts = 0;
    double expert_hidden = 0;
    int tp = 1;
    double imbalance = 1.0;
};
double moe_mlp_activation_bytes(const MoeActivationShape& shape);
inline constexpr const char* moe_mlp_activation_formula = "4TE + 2Tkρh + 6T(kρ+S)f_e/t + 2Tkh";

// Forward FLOPs per token of an MoE layer's MLP part (Megatron-LM's convention, 2 per
// multiply-add, matmuls only; arXiv 2104.04473 sec. 5.1): the router 2·h·E and k routed plus S
// shared experts, 2·m·h·f_e each (m = 3 SwiGLU, 2 GELU matrices). Backward is twice the forward.
double moe_mlp_forward_flops_per_token(double hidden, double experts, double top_k, double shared_experts,
                                       double expert_hidden, double expert_matrices = 3.0);

}  // namespace parbench
