// Blockwise attention on the CPU (ring attention's pieces, and FlashAttention's for a whole
// sequence): per (batch, query head), sgemm calls over sub-blocks of query rows with the
// softmax rows between them branch-free and vectorised, as attention_heads.cpp does for the
// standard attention. A sub-block of `query_rows` queries ending at row r1 of a causal block
// needs keys 0 .. r1 - 1 only, so the GEMMs skip most of the masked triangle; the masked scores
// inside the sub-block are set to probability 0 so the GEMMs may run over them. Every sub-block
// of every head reuses the first query_rows x cols floats of the score scratch (backward: two
// such tiles), so a block of any length keeps its scores in cache (512 KB at 2048 keys) and
// never writes the T x T matrix the standard attention keeps. Backward accumulates (+=) into
// dq, dk, dv, recomputing P from the saved lse (FlashAttention-2, arXiv 2307.08691, alg. 2).
#include <cblas.h>

#include <algorithm>
#include <cstddef>
#include <limits>

#include "kernels/block_attention_math.hpp"
#include "kernels/softmax_math.hpp"
#include "train/ops/cpu_ops.hpp"
#include "train/ops/cpu_simd.hpp"

namespace parbench {
namespace {

constexpr int query_rows = block_query_rows;

// row[0..n) = exp(row - max) (unnormalised), row[n..width) = 0; writes the row's max and sum.
PARBENCH_SIMD_LOOP void partial_softmax_row(float* __restrict row, std::size_t n, std::size_t width,
                                            float& row_max, float& row_sum) {
    row_max = simd::lane_max(row, n);
    const float m = row_max;
    for (std::size_t j = 0; j < n; ++j) row[j] = softmax_term(row[j], m);
    row_sum = simd::lane_sum(n, [&](std::size_t j) { return row[j]; });
    std::fill(row + n, row + width, 0.0f);
}

// p[0..n) = P recomputed from the scores and the row's lse; ds[0..n) = dS from dP (in ds) and
// D; both 0 over [n, width).
PARBENCH_SIMD_LOOP void probability_gradient_row(float* __restrict p, float* __restrict ds, std::size_t n,
                                                 std::size_t width, float lse, float delta) {
    for (std::size_t j = 0; j < n; ++j) {
        p[j] = block_probability(p[j], lse);
        ds[j] = softmax_input_gradient(p[j], ds[j], delta);
    }
    std::fill(p + n, p + width, 0.0f);
    std::fill(ds + n, ds + width, 0.0f);
}

// The block's query, key/value and output rows as sgemm sees them: pitches in floats.
struct BlockPitches {
    int q, kv, out;
};
BlockPitches pitches(const AttentionBlock& a) { return {a.q_stride(), a.kv_stride(), a.NH * a.hs}; }

// The floats of one sub-block's score tile (Ops::block_attention_scratch_floats).
std::size_t sub_block_tile(const AttentionBlock& a) { return a.sub_block_tile_elements(); }

// Keys the sub-block of queries [first, first + rows) reaches: a causal block's query t sees
// keys 0..t.
int sub_block_keys(const AttentionBlock& a, int first, int rows) {
    return a.mask == BlockMask::causal ? first + rows : a.cols;
}

}  // namespace

void CpuOps::block_attention_forward(float* part_out, float* part_max, float* part_sum, float* scores,
                                     const float* q, const float* k, const float* v, const AttentionBlock& a) {
    const float scale = attention_scale(a.hs);
    const BlockPitches ld = pitches(a);
    for (std::size_t b = 0; b < static_cast<std::size_t>(a.B); ++b)
        for (std::size_t h = 0; h < static_cast<std::size_t>(a.NH); ++h) {
            const std::size_t j = static_cast<std::size_t>(a.kv_head(static_cast<int>(h)));
            const float* keys_k = k + a.kv_offset(b, 0, j);
            const float* keys_v = v + a.kv_offset(b, 0, j);
            for (int first = 0; first < a.rows; first += query_rows) {
                const int rows = std::min(query_rows, a.rows - first);
                const int keys = sub_block_keys(a, first, rows);
                const auto t0 = static_cast<std::size_t>(first);
                float* tile = scores;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, a.hs, scale, q + a.q_offset(b, t0, h),
                            ld.q, keys_k, ld.kv, 0.0f, tile, a.cols);
                simd::run(kernels_, [&]() PARBENCH_SIMD_BODY {
                    for (std::size_t t = t0; t < t0 + static_cast<std::size_t>(rows); ++t)
                        partial_softmax_row(tile + (t - t0) * static_cast<std::size_t>(a.cols),
                                            static_cast<std::size_t>(a.visible_keys(static_cast<int>(t))),
                                            static_cast<std::size_t>(keys), part_max[a.stat_index(b, t, h)],
                                            part_sum[a.stat_index(b, t, h)]);
                });
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, a.hs, keys, 1.0f, tile, a.cols, keys_v,
                            ld.kv, 0.0f, part_out + a.out_offset(b, t0, h), ld.out);
            }
        }
}

void CpuOps::block_attention_merge(float* out, float* row_max, float* row_sum, const float* part_out,
                                   const float* part_max, const float* part_sum, const AttentionBlock& a) {
    for (std::size_t b = 0; b < static_cast<std::size_t>(a.B); ++b)
        for (std::size_t t = 0; t < static_cast<std::size_t>(a.rows); ++t)
            for (std::size_t h = 0; h < static_cast<std::size_t>(a.NH); ++h) {
                const std::size_t r = a.stat_index(b, t, h);
                const OnlineSoftmaxMerge m = online_softmax_merge(row_max[r], row_sum[r], part_max[r], part_sum[r]);
                float* y = out + a.out_offset(b, t, h);
                const float* p = part_out + a.out_offset(b, t, h);
                for (int i = 0; i < a.hs; ++i) y[i] = y[i] * m.running_factor + p[i] * m.partial_factor;
                row_max[r] = m.row_max;
                row_sum[r] = m.row_sum;
            }
}

void CpuOps::block_attention_finish(float* out, float* lse, const float* row_max, const float* row_sum,
                                    std::size_t rows, int hs) {
    for (std::size_t r = 0; r < rows; ++r) {
        float* y = out + r * hs;
        for (int i = 0; i < hs; ++i) y[i] /= row_sum[r];
        lse[r] = log_sum_exp(row_max[r], row_sum[r]);
    }
}

void CpuOps::block_attention_delta(float* delta, const float* dout, const float* out, std::size_t rows, int hs) {
    for (std::size_t r = 0; r < rows; ++r) {
        float sum = 0.0f;
        for (int i = 0; i < hs; ++i) sum += dout[r * hs + i] * out[r * hs + i];
        delta[r] = sum;
    }
}

void CpuOps::block_attention_backward(float* dq, float* dk, float* dv, float* scratch, const float* dout,
                                      const float* q, const float* k, const float* v, const float* lse,
                                      const float* delta, const AttentionBlock& a) {
    const float scale = attention_scale(a.hs);
    const BlockPitches ld = pitches(a);
    float* p = scratch;                       // S, then P
    float* ds = scratch + sub_block_tile(a);  // dP, then dS
    for (std::size_t b = 0; b < static_cast<std::size_t>(a.B); ++b)
        for (std::size_t h = 0; h < static_cast<std::size_t>(a.NH); ++h) {
            const std::size_t j = static_cast<std::size_t>(a.kv_head(static_cast<int>(h)));
            const std::size_t kv = a.kv_offset(b, 0, j);
            for (int first = 0; first < a.rows; first += query_rows) {
                const int rows = std::min(query_rows, a.rows - first);
                const int keys = sub_block_keys(a, first, rows);
                const auto t0 = static_cast<std::size_t>(first);
                const std::size_t qo = a.q_offset(b, t0, h), oo = a.out_offset(b, t0, h);
                // S (into p) and dP = dY Vᵀ (into ds) over the keys the sub-block sees
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, a.hs, scale, q + qo, ld.q, k + kv,
                            ld.kv, 0.0f, p, a.cols);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, a.hs, 1.0f, dout + oo, ld.out,
                            v + kv, ld.kv, 0.0f, ds, a.cols);
                simd::run(kernels_, [&]() PARBENCH_SIMD_BODY {
                    for (std::size_t t = t0; t < t0 + static_cast<std::size_t>(rows); ++t)
                        probability_gradient_row(p + (t - t0) * static_cast<std::size_t>(a.cols),
                                                 ds + (t - t0) * static_cast<std::size_t>(a.cols),
                                                 static_cast<std::size_t>(a.visible_keys(static_cast<int>(t))),
                                                 static_cast<std::size_t>(keys), lse[a.stat_index(b, t, h)],
                                                 delta[a.stat_index(b, t, h)]);
                });
                // dV += Pᵀ dY, dQ += scale dS K, dK += scale dSᵀ Q
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys, a.hs, rows, 1.0f, p, a.cols, dout + oo,
                            ld.out, 1.0f, dv + kv, ld.kv);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, a.hs, keys, scale, ds, a.cols, k + kv,
                            ld.kv, 1.0f, dq + qo, ld.q);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys, a.hs, rows, scale, ds, a.cols, q + qo, ld.q,
                            1.0f, dk + kv, ld.kv);
            }
        }
}

}  // namespace parbench
