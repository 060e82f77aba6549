// Blockwise attention on the CPU (ring attention's pieces), direct loops per (batch, query
// head, query) over the formulas of kernels/block_attention_math.hpp. Backward accumulates
// (+=) into dq, dk, dv; it needs no score tiles on the CPU (each score is recomputed, used and
// dropped in one pass), so its scratch is left untouched.
#include <algorithm>
#include <cstddef>
#include <limits>

#include "kernels/block_attention_math.hpp"
#include "kernels/softmax_math.hpp"
#include "train/ops/cpu_ops.hpp"

namespace parbench {

void CpuOps::block_attention_forward(float* part_out, float* part_max, float* part_sum, float* scores,
                                     const float* q, const float* k, const float* v, const AttentionBlock& a) {
    const float scale = attention_scale(a.hs);
    for (std::size_t b = 0; b < static_cast<std::size_t>(a.B); ++b)
        for (std::size_t h = 0; h < static_cast<std::size_t>(a.NH); ++h) {
            const std::size_t j = static_cast<std::size_t>(a.kv_head(static_cast<int>(h)));
            for (std::size_t t = 0; t < static_cast<std::size_t>(a.rows); ++t) {
                const int keys = a.visible_keys(static_cast<int>(t));
                const float* qt = q + a.q_offset(b, t, h);
                float* row = scores + a.tile_index(b, h, t, 0);
                float row_max = -std::numeric_limits<float>::infinity();
                for (int t2 = 0; t2 < keys; ++t2) {
                    row[t2] = block_score(qt, k + a.kv_offset(b, t2, j), a.hs, scale);
                    row_max = std::max(row_max, row[t2]);
                }
                float* y = part_out + a.q_offset(b, t, h);
                std::fill(y, y + a.hs, 0.0f);
                float row_sum = 0.0f;
                for (int t2 = 0; t2 < keys; ++t2) {
                    const float p = softmax_term(row[t2], row_max);
                    row_sum += p;
                    const float* vt = v + a.kv_offset(b, t2, j);
                    for (int i = 0; i < a.hs; ++i) y[i] += p * vt[i];
                }
                part_max[a.stat_index(b, t, h)] = row_max;
                part_sum[a.stat_index(b, t, h)] = row_sum;
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
                float* y = out + a.q_offset(b, t, h);
                const float* p = part_out + a.q_offset(b, t, h);
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

void CpuOps::block_attention_backward(float* dq, float* dk, float* dv, float* /*scratch*/, const float* dout,
                                      const float* q, const float* k, const float* v, const float* lse,
                                      const float* delta, const AttentionBlock& a) {
    const float scale = attention_scale(a.hs);
    for (std::size_t b = 0; b < static_cast<std::size_t>(a.B); ++b)
        for (std::size_t h = 0; h < static_cast<std::size_t>(a.NH); ++h) {
            const std::size_t j = static_cast<std::size_t>(a.kv_head(static_cast<int>(h)));
            for (std::size_t t = 0; t < static_cast<std::size_t>(a.rows); ++t) {
                const int keys = a.visible_keys(static_cast<int>(t));
                const std::size_t qo = a.q_offset(b, t, h);
                const float* qt = q + qo;
                const float* dy = dout + qo;
                float* dqt = dq + qo;
                const float row_lse = lse[a.stat_index(b, t, h)];
                const float row_delta = delta[a.stat_index(b, t, h)];
                for (int t2 = 0; t2 < keys; ++t2) {
                    const std::size_t ko = a.kv_offset(b, t2, j);
                    const float p = block_probability(block_score(qt, k + ko, a.hs, scale), row_lse);
                    float dp = 0.0f;
                    for (int i = 0; i < a.hs; ++i) dp += dy[i] * v[ko + i];
                    const float ds = softmax_input_gradient(p, dp, row_delta);
                    for (int i = 0; i < a.hs; ++i) {
                        dqt[i] += scale * ds * k[ko + i];
                        dk[ko + i] += scale * ds * qt[i];
                        dv[ko + i] += p * dy[i];
                    }
                }
            }
        }
}

}  // namespace parbench
