// Causal attention of one head as sgemm calls over blocks of query rows: a block of `rows`
// queries ending at row r1 needs keys 0 .. r1 - 1 only, so the GEMMs skip most of the masked
// upper triangle (with 32-row blocks and T = 128, 62.5 % of the full T x T work), and the
// softmax rows between them are branch-free vectorised loops (fast_exp, fixed-order sums).
// The backward is the softmax-attention chain rule as GEMMs (as FlashAttention-2's, arXiv
// 2307.08691 alg. 2, without the recomputation: the probabilities are kept):
//   dP = dY Vᵀ,  dS = P ∘ (dP - rowsum(P ∘ dP)),  dV += Pᵀ dY,  dQ += scale dS K,  dK += scale dSᵀ Q.
#include "train/ops/attention_heads.hpp"

#include <cblas.h>

#include <algorithm>

#include "kernels/softmax_math.hpp"
#include "train/ops/cpu_simd.hpp"

namespace parbench {
namespace {

constexpr int query_block = 32;

// att[0..n) = softmax(pre[0..n)), att[n..T) = pre[n..T) = 0.
PARBENCH_SIMD_LOOP void causal_softmax_row(float* __restrict att, float* __restrict pre, std::size_t n,
                                           std::size_t T) {
    const float row_max = simd::lane_max(pre, n);
    for (std::size_t j = 0; j < n; ++j) att[j] = softmax_term(pre[j], row_max);
    const float inverse = 1.0f / simd::lane_sum(n, [&](std::size_t j) { return att[j]; });
    for (std::size_t j = 0; j < n; ++j) att[j] *= inverse;
    std::fill(att + n, att + T, 0.0f);
    std::fill(pre + n, pre + T, 0.0f);
}

// dpre[0..n) = d scores from the probabilities and their gradient; the rest of both rows 0.
PARBENCH_SIMD_LOOP void causal_softmax_row_backward(float* __restrict dpre, float* __restrict datt,
                                                    const float* __restrict att, std::size_t n, std::size_t T) {
    const float sum_a_da = simd::lane_sum(n, [&](std::size_t j) { return att[j] * datt[j]; });
    for (std::size_t j = 0; j < n; ++j) dpre[j] = softmax_input_gradient(att[j], datt[j], sum_a_da);
    std::fill(dpre + n, dpre + T, 0.0f);
    std::fill(datt + n, datt + T, 0.0f);
}

}  // namespace

void attention_head_forward(CpuKernels kernels, const AttentionHead& h, float* out, float* preatt, float* att) {
    const float scale = attention_scale(h.hs);
    const auto T = static_cast<std::size_t>(h.T);
    for (int r0 = 0; r0 < h.T; r0 += query_block) {
        const int rows = std::min(query_block, h.T - r0);
        const int keys = r0 + rows;
        const auto first = static_cast<std::size_t>(r0);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, h.hs, scale, h.q + first * h.ldq,
                    static_cast<int>(h.ldq), h.k, static_cast<int>(h.ldk), 0.0f, preatt + first * T, h.T);
        simd::run(kernels, [&]() PARBENCH_SIMD_BODY {
            for (std::size_t t = first; t < first + static_cast<std::size_t>(rows); ++t)
                causal_softmax_row(att + t * T, preatt + t * T, t + 1, T);
        });
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, h.hs, keys, 1.0f, att + first * T, h.T, h.v,
                    static_cast<int>(h.ldv), 0.0f, out + first * h.ldo, static_cast<int>(h.ldo));
    }
}

void attention_head_backward(CpuKernels kernels, const AttentionHead& h, float* dq, float* dk, float* dv,
                             float* dpreatt, float* datt, const float* dout, const float* att) {
    const float scale = attention_scale(h.hs);
    const auto T = static_cast<std::size_t>(h.T);
    const int ldq = static_cast<int>(h.ldq), ldk = static_cast<int>(h.ldk), ldv = static_cast<int>(h.ldv),
              ldo = static_cast<int>(h.ldo);
    for (int r0 = 0; r0 < h.T; r0 += query_block) {
        const int rows = std::min(query_block, h.T - r0);
        const int keys = r0 + rows;
        const auto first = static_cast<std::size_t>(r0);
        const float* dy = dout + first * h.ldo;
        const float* p = att + first * T;
        float* ds = dpreatt + first * T;
        // dP = dY Vᵀ over the keys this block sees
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, h.hs, 1.0f, dy, ldo, h.v, ldv, 0.0f,
                    datt + first * T, h.T);
        simd::run(kernels, [&]() PARBENCH_SIMD_BODY {
            for (std::size_t t = first; t < first + static_cast<std::size_t>(rows); ++t)
                causal_softmax_row_backward(dpreatt + t * T, datt + t * T, att + t * T, t + 1, T);
        });
        // dV += Pᵀ dY, dQ += scale dS K, dK += scale dSᵀ Q
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys, h.hs, rows, 1.0f, p, h.T, dy, ldo, 1.0f, dv, ldv);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, h.hs, keys, scale, ds, h.T, h.k, ldk, 1.0f,
                    dq + first * h.ldq, ldq);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys, h.hs, rows, scale, ds, h.T, h.q + first * h.ldq,
                    ldq, 1.0f, dk, ldk);
    }
}

}  // namespace parbench
