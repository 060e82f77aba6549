// The work one transformer layer does on one tensor-parallel rank for one micro-batch, split as
// a pipeline schedule splits it: forward (F), input gradient (B), weight gradient (W), and what
// activation recompute repeats. Each part is GEMMs, with their shapes after the tp split and the
// micro-batch, and memory-bound element-wise traffic (LayerNorm/RMSNorm, softmax, dropout,
// GeLU/SwiGLU, residual and bias adds, RoPE) in bytes moved to and from HBM.
//
// Conventions (the time a step takes, not the MFU's model FLOPs, which keep arXiv 2104.04473's
// full s x s attention):
// - Naive attention (Megatron's fused scale-mask-softmax, arXiv 2205.05198 sec. 4) materialises
//   the s x s scores and computes them in full; the causal mask is applied after the product.
// - Flash attention (arXiv 2205.14135, 2307.08691) keeps no s x s tensor: the backward recomputes
//   the scores (5 products where the naive backward has 4), and a causal kernel skips the blocks
//   above the diagonal, so its products do half of the full s x s work (Megatron-Core's FLOP count
//   halves core attention for the same reason).
// - The backward's element-wise work reads the saved input and the incoming gradient and writes
//   the outgoing gradient: 3 tensors where the forward moves 2, so 1.5 x the forward's bytes.
#pragma once

#include <string>
#include <vector>

#include "theory/activation_memory.hpp"
#include "theory/model_config.hpp"

namespace parbench {

enum class AttentionKind { flash, naive };
AttentionKind parse_attention(const std::string& name);  // UsageError naming --attention
std::string attention_name(AttentionKind attention);

// What a product is: a linear layer's (weights by activations, or its weight gradient), attention's per-head products
// through a GEMM library (naive attention), or products inside a fused attention kernel (flash
// attention's forward or backward), which run at that kernel's rate (plan/device_compute.hpp).
// A linear layer's weight gradient is its own role: its operands are the forward's input and the
// backward's output gradient, already cast when the layer runs in FP8 (plan/device_compute.hpp).
enum class GemmRole { linear, linear_weight_grad, attention, fused_attention_forward, fused_attention_backward };

struct Gemm {
    std::string name;
    double m = 0, n = 0, k = 0;  // one product of (m x k) by (k x n)
    double count = 1;            // products of this shape in one call (batch x heads)
    double element_bytes = 2;    // of its operands and result
    GemmRole role = GemmRole::linear;
    double flops() const { return 2.0 * m * n * k * count; }
    // Reads of both operands and the write of the result: what bounds a GEMM of low arithmetic
    // intensity (attention's per-head products, k = head dim) by memory bandwidth.
    double bytes() const { return element_bytes * (m * k + k * n + m * n) * count; }
};

struct PassWork {
    std::vector<Gemm> gemms;
    double memory_bytes = 0;  // element-wise traffic to and from HBM
    double flops() const;
    void add(const PassWork& other);
};

struct LayerWork {
    PassWork forward, input_grad, weight_grad, recompute;
};

struct LayerWorkShape {
    ModelConfig model;   // gpt or llama
    double seq = 1;      // this rank's tokens of each sequence (seq_len / cp)
    double keys = 1;     // the keys each query attends over (seq_len)
    double micro = 1;    // sequences per micro-batch
    int tp = 1;
    bool sp = false;
    double element_bytes = 2;  // of activations: 2 in bf16/fp16, 4 in fp32
    bool mlp = true;           // false: the block's attention part only (an MoE layer's, theory/moe_work.hpp)
    // The loss as a framework's PyTorch code runs it (Megatron-core's vocab-parallel cross-entropy,
    // torch's cross_entropy: head_work); false: parbench's own fused loss.
    bool framework_loss = false;
    // A Llama block's RMSNorms, RoPE and SwiGLU as eager PyTorch runs torchtitan's code, one kernel
    // per op with the norm's and RoPE's fp32 upcasts (layer_work.cpp); false: one fused kernel each
    // (torch.compile, Megatron-core/Transformer Engine, parbench's own train).
    bool eager_elementwise = false;
};

// One transformer block's work on one rank.
LayerWork transformer_layer_work(const LayerWorkShape& shape, AttentionKind attention, Recompute recompute);
// A deep MLP's layer (no sequence, no attention: the model has neither); its first layer
// and its loss need no embedding or head work.
LayerWork mlp_layer_work(const LayerWorkShape& shape);
// The last stage's final norm, vocabulary-parallel logits and cross-entropy; the first stage's
// embedding lookup and its gradient's scatter (memory-bound, its weight gradient is no GEMM).
LayerWork head_work(const LayerWorkShape& shape);
LayerWork embedding_work(const LayerWorkShape& shape);

}  // namespace parbench
