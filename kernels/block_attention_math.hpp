// Attention computed block by block, the pieces ring attention is made of (Liu et al., arXiv
// 2310.01889, sec. 3): a block of queries against a block of keys/values gives an
// UNNORMALISED partial output with its row max m and row sum l (the online softmax of
// Milakov & Gimelshein, arXiv 1805.02867); partials merge by rescaling to the larger max; the
// last step divides by l and keeps lse = m + log l for backward. Backward is FlashAttention-2's
// (Dao, arXiv 2307.08691, alg. 2): D = rowsum(dout * out), P = exp(s - lse) recomputed from q,
// k and the saved lse, dP = dout · v, dS = P (dP - D); dq += scale dS k, dk += scale dSᵀ q,
// dv += Pᵀ dout. CPU ops and CUDA kernels call these functions, so the CPU tests exercise the
// formulas the GPU runs.
//
// Layouts (GqaShape's, with a token window): out, dout are (B, q_tokens, NH*hs) and the block's
// queries are tokens [q_begin, q_begin + rows) of every sequence; q, dq hold a token's NH*hs
// floats every q_pitch floats, k, v, dk, dv its NKV*hs every kv_pitch (NH*hs and NKV*hs when q,
// k and v lie apart; 3C inside GPT's fused qkv rows, read in place), and the block's keys are
// tokens [kv_begin, kv_begin + cols). Row statistics (max, sum, lse, D) are (B, q_tokens, NH).
// Query head h reads key/value head kv_head(h).
#pragma once

#include <cmath>
#include <cstddef>

#include "fast_exp_math.hpp"
#include "gqa_math.hpp"
#include "host_device.hpp"

namespace parbench {

// full: every query sees every key of the block. causal: the diagonal block of a causal
// sequence (rows == cols, query t sees keys 0..t). A block wholly in the future is not
// computed at all: the caller skips it.
enum class BlockMask : int { full = 0, causal = 1 };

// The CPU kernels (src/train/ops/block_attention.cpp) take a block's queries this many rows at
// a time, each sub-block's scores in one tile of block_query_rows x cols floats that every
// sub-block reuses: their scratch, whatever the block's length.
inline constexpr int block_query_rows = 32;

struct AttentionBlock {
    int B = 1, NH = 1, NKV = 1, hs = 1;
    int first_query_head = 0, queries_per_kv = 1;  // GqaShape's head mapping
    int q_tokens = 1, q_begin = 0, rows = 1;
    int kv_tokens = 1, kv_begin = 0, cols = 1;
    BlockMask mask = BlockMask::full;
    // Floats from one token's q (k, v) to the next's; 0: packed, NH*hs (NKV*hs).
    int q_pitch = 0, kv_pitch = 0;

    PARBENCH_HD int q_stride() const { return q_pitch != 0 ? q_pitch : NH * hs; }
    PARBENCH_HD int kv_stride() const { return kv_pitch != 0 ? kv_pitch : NKV * hs; }

    PARBENCH_HD int kv_head(int h) const { return (first_query_head + h) / queries_per_kv; }
    // Keys 0..visible_keys(t)-1 of the block are seen by its query t.
    PARBENCH_HD int visible_keys(int t) const { return mask == BlockMask::causal ? t + 1 : cols; }
    // First float of query t's head h in q and dq (t counts from the block's first query).
    PARBENCH_HD std::size_t q_offset(std::size_t b, std::size_t t, std::size_t h) const {
        return (b * q_tokens + q_begin + t) * static_cast<std::size_t>(q_stride()) + h * hs;
    }
    // ... and in out, dout and the partial outputs, (B, q_tokens, NH*hs).
    PARBENCH_HD std::size_t out_offset(std::size_t b, std::size_t t, std::size_t h) const {
        return ((b * q_tokens + q_begin + t) * NH + h) * hs;
    }
    PARBENCH_HD std::size_t kv_offset(std::size_t b, std::size_t t2, std::size_t j) const {
        return (b * kv_tokens + kv_begin + t2) * static_cast<std::size_t>(kv_stride()) + j * hs;
    }
    PARBENCH_HD std::size_t stat_index(std::size_t b, std::size_t t, std::size_t h) const {
        return (b * q_tokens + q_begin + t) * NH + h;
    }
    // Score tiles (B, NH, rows, cols), one entry per query-key pair of the block.
    PARBENCH_HD std::size_t tile_elements() const { return static_cast<std::size_t>(B) * NH * rows * cols; }
    // One query sub-block's tile (block_query_rows): the CPU kernels' score scratch.
    PARBENCH_HD std::size_t sub_block_tile_elements() const {
        return static_cast<std::size_t>(rows < block_query_rows ? rows : block_query_rows) * cols;
    }
    PARBENCH_HD std::size_t tile_index(std::size_t b, std::size_t h, std::size_t t, std::size_t t2) const {
        return ((b * NH + h) * rows + t) * cols + t2;
    }
    PARBENCH_HD std::size_t query_rows() const { return static_cast<std::size_t>(B) * NH * rows; }
    PARBENCH_HD std::size_t q_elements() const { return query_rows() * hs; }
    PARBENCH_HD std::size_t kv_elements() const { return static_cast<std::size_t>(B) * cols * NKV * hs; }
    // Scores the block evaluates: the work it does, masked pairs excluded.
    PARBENCH_HD std::size_t visible_scores() const {
        const std::size_t per_head = mask == BlockMask::causal ? static_cast<std::size_t>(rows) * (rows + 1) / 2
                                                               : static_cast<std::size_t>(rows) * cols;
        return static_cast<std::size_t>(B) * NH * per_head;
    }
};

// The block of queries [q_begin, q_begin + rows) against keys [kv_begin, kv_begin + cols) of
// tensors shaped as `s` (both T tokens per sequence).
inline AttentionBlock attention_block(const GqaShape& s, int q_begin, int rows, int kv_begin, int cols,
                                      BlockMask mask) {
    AttentionBlock block;
    block.B = s.B;
    block.NH = s.NH;
    block.NKV = s.NKV;
    block.hs = s.hs;
    block.first_query_head = s.first_query_head;
    block.queries_per_kv = s.queries_per_kv;
    block.q_tokens = s.T;
    block.q_begin = q_begin;
    block.rows = rows;
    block.kv_tokens = s.T;
    block.kv_begin = kv_begin;
    block.cols = cols;
    block.mask = mask;
    return block;
}

// Scaled score of one query row against one key row (Vaswani et al., eq. 1).
PARBENCH_HD float block_score(const float* q_row, const float* k_row, int hs, float scale) {
    float dot = 0.0f;
    for (int i = 0; i < hs; ++i) dot += q_row[i] * k_row[i];
    return dot * scale;
}

// How a running (max, sum) and a new partial's (max, sum) combine: both are rescaled to the
// larger max, m = max(m_run, m_new), l = l_run e^(m_run - m) + l_new e^(m_new - m). An empty
// running row (m_run = -inf, l_run = 0) takes the partial as it is.
struct OnlineSoftmaxMerge {
    float row_max;
    float row_sum;
    float running_factor;  // multiplies the running output
    float partial_factor;  // multiplies the partial output
};

PARBENCH_HD OnlineSoftmaxMerge online_softmax_merge(float running_max, float running_sum, float partial_max,
                                                    float partial_sum) {
    const float row_max = fmaxf(running_max, partial_max);
    const float running_factor = running_max == -INFINITY ? 0.0f : expf(running_max - row_max);
    const float partial_factor = partial_max == -INFINITY ? 0.0f : expf(partial_max - row_max);
    return {row_max, running_sum * running_factor + partial_sum * partial_factor, running_factor, partial_factor};
}

// log sum_j exp(s_j) of a row from its max and its sum of exp(s_j - max).
PARBENCH_HD float log_sum_exp(float row_max, float row_sum) { return row_max + logf(row_sum); }

// Softmax probability of a score, recomputed from the row's log-sum-exp, with the exponential
// the forward's terms used (fast_exp, as softmax_term): the CPU evaluates it in vectorised rows.
PARBENCH_HD float block_probability(float score, float lse) { return fast_exp(score - lse); }

}  // namespace parbench
