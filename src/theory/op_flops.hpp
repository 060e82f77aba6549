// Work per op call, shared by the op benchmarks (parbench-ops) and the engine's FLOP
// accounting, so that both count the same way.
//   flops: floating-point operations, a multiply-add counted as 2. Attention is counted over
//          the full T x T score matrix, without the causal discount, as Megatron-LM's model
//          FLOPs formula does (arXiv 2104.04473, appendix); the kernels do about half of it.
//   bytes: the least memory traffic the op can have: every input read once, every output
//          written once, an accumulated (+=) output read and written. Real kernels move more;
//          this is the yardstick for bandwidth-bound ops.
#pragma once

#include <cstddef>

namespace parbench {

struct OpCost {
    double flops = 0.0;
    double bytes = 0.0;
};

namespace detail {
constexpr double f32 = 4.0;  // bytes of a float
constexpr double i32 = 4.0;  // bytes of a token id
}  // namespace detail

constexpr double matmul_flops(double N, double C, double OC) { return 2.0 * N * C * OC; }

// out (N,OC) = inp (N,C) · weight (OC,C)ᵀ + bias
constexpr OpCost matmul_forward_cost(double N, double C, double OC) {
    return {matmul_flops(N, C, OC) + N * OC, detail::f32 * (N * C + OC * C + OC + N * OC)};
}
// dinp and dweight are one GEMM each; dbias a column sum
constexpr OpCost matmul_backward_cost(double N, double C, double OC) {
    return {2.0 * matmul_flops(N, C, OC) + N * OC,
            detail::f32 * (N * OC + N * C + OC * C + 2.0 * (N * C + OC * C + OC))};
}

// mean, variance, normalise, scale and shift: about 8 operations per element
constexpr OpCost layernorm_forward_cost(double N, double C) {
    return {8.0 * N * C, detail::f32 * (2.0 * N * C + 2.0 * C + 2.0 * N)};
}
constexpr OpCost layernorm_backward_cost(double N, double C) {
    return {14.0 * N * C, detail::f32 * (2.0 * N * C + 2.0 * N * C + C + 2.0 * N + 4.0 * C)};
}

// tanh counted as one operation; the polynomial around it as 8 (forward) and 16 (backward)
constexpr OpCost gelu_forward_cost(double n) { return {9.0 * n, detail::f32 * 2.0 * n}; }
constexpr OpCost gelu_backward_cost(double n) { return {17.0 * n, detail::f32 * 4.0 * n}; }

// QKᵀ and att·V, each 2 T^2 C per sequence (full matrix, see above), plus the softmax (~5 per score)
constexpr OpCost attention_forward_cost(double B, double T, double C, double NH) {
    return {4.0 * B * T * T * C + 5.0 * B * NH * T * T, detail::f32 * (B * T * 3.0 * C + B * T * C + 2.0 * B * NH * T * T)};
}
// twice the forward's GEMM work (each product has two gradients), plus the softmax backward
constexpr OpCost attention_backward_cost(double B, double T, double C, double NH) {
    return {8.0 * B * T * T * C + 4.0 * B * NH * T * T,
            detail::f32 * (B * T * C + 3.0 * B * NH * T * T + B * T * 3.0 * C + 2.0 * B * T * 3.0 * C)};
}

// gathers rows: no arithmetic beyond the position add
constexpr OpCost encoder_forward_cost(double B, double T, double C) {
    return {B * T * C, detail::i32 * B * T + detail::f32 * 3.0 * B * T * C};
}
constexpr OpCost encoder_backward_cost(double B, double T, double C) {
    return {2.0 * B * T * C, detail::i32 * B * T + detail::f32 * 5.0 * B * T * C};
}

constexpr OpCost residual_forward_cost(double n) { return {n, detail::f32 * 3.0 * n}; }

// max, exp, sum, divide per logit (exp counted as one), loss per row
constexpr OpCost crossentropy_forward_cost(double BT, double V) {
    return {4.0 * BT * V, detail::f32 * (2.0 * BT * V + BT) + detail::i32 * BT};
}
constexpr OpCost crossentropy_backward_cost(double BT, double V) {
    return {2.0 * BT * V, detail::f32 * (3.0 * BT * V + BT) + detail::i32 * BT};
}

// ---- Llama's ops (kernels/{rmsnorm,swiglu,rope,gqa}_math.hpp) ----
// sum of squares, then scale and weight: about 4 operations per element
constexpr OpCost rmsnorm_forward_cost(double N, double C) {
    return {4.0 * N * C, detail::f32 * (2.0 * N * C + C + N)};
}
// reads dout and inp, dinp +=, dweight +=: about 10 per element
constexpr OpCost rmsnorm_backward_cost(double N, double C) {
    return {10.0 * N * C, detail::f32 * (2.0 * N * C + 2.0 * N * C + C + 2.0 * C + N)};
}
// silu(gate) * up, the sigmoid's exp counted as one: about 6 per element
constexpr OpCost swiglu_forward_cost(double n) { return {6.0 * n, detail::f32 * 3.0 * n}; }
// reads dout, gate, up; dgate and dup +=: about 12 per element
constexpr OpCost swiglu_backward_cost(double n) { return {12.0 * n, detail::f32 * 7.0 * n}; }
// in place on (B,T,H*hs): each pair 4 multiplies and 2 adds (the angles, per position and
// pair, are not counted); backward is the same turn by the negative angle
constexpr OpCost rope_cost(double B, double T, double H, double hs) {
    return {3.0 * B * T * H * hs, detail::f32 * 2.0 * B * T * H * hs + detail::i32 * T};
}
// causal grouped-query attention, NH query heads over NKV key/value heads of size hs, counted
// as attention_forward_cost (full T x T, Megatron's convention): the GEMM work is the query
// heads', the traffic reads the smaller K and V
constexpr OpCost gqa_attention_forward_cost(double B, double T, double NH, double NKV, double hs) {
    return {4.0 * B * T * T * NH * hs + 5.0 * B * NH * T * T,
            detail::f32 * (B * T * (2.0 * NH + 2.0 * NKV) * hs + 2.0 * B * NH * T * T)};
}
// reads dout, q, k, v and att; writes dpreatt and datt; dq, dk, dv +=
constexpr OpCost gqa_attention_backward_cost(double B, double T, double NH, double NKV, double hs) {
    return {8.0 * B * T * T * NH * hs + 4.0 * B * NH * T * T,
            detail::f32 * (B * T * NH * hs + 3.0 * B * NH * T * T + B * T * (NH + 2.0 * NKV) * hs +
                           2.0 * B * T * (NH + 2.0 * NKV) * hs)};
}

// Block (FlashAttention-style) attention over whole sequences, causal (CpuOps::block_attention_*:
// one causal block, then finish; backward: delta, then the block). The FLOPs by the convention
// above (the full T x T matrix); the traffic has no T x T term: the scores never leave the cache.
// forward: reads q, k, v; writes out and lse
constexpr OpCost block_attention_forward_cost(double B, double T, double NH, double NKV, double hs) {
    return {4.0 * B * T * T * NH * hs + 5.0 * B * NH * T * T,
            detail::f32 * (B * T * (2.0 * NH + 2.0 * NKV) * hs + B * T * NH)};
}
// backward: the standard backward's work plus the recomputed scores (2 T^2 hs a head) and D;
// reads dout, out, q, k, v and lse; dq, dk, dv +=
constexpr OpCost block_attention_backward_cost(double B, double T, double NH, double NKV, double hs) {
    return {10.0 * B * T * T * NH * hs + 4.0 * B * NH * T * T + 2.0 * B * T * NH * hs,
            detail::f32 * (2.0 * B * T * NH * hs + B * T * (NH + 2.0 * NKV) * hs + B * T * NH +
                           2.0 * B * T * (NH + 2.0 * NKV) * hs)};
}

constexpr OpCost mse_forward_cost(double N, double D) { return {3.0 * N * D, detail::f32 * (2.0 * N * D + N)}; }
constexpr OpCost mse_backward_cost(double N, double D) { return {4.0 * N * D, detail::f32 * (4.0 * N * D + N)}; }

// two moment updates, bias corrections, sqrt, divide, decay: about 14 per parameter; reads
// param, grad, m, v and writes param, m, v
constexpr OpCost adamw_cost(double n) { return {14.0 * n, detail::f32 * 7.0 * n}; }

}  // namespace parbench
