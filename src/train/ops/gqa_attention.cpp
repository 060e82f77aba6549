// Causal grouped-query attention on the CPU, direct loops per (batch, query head, query), as
// attention.cpp does for multi-head attention; query head h reads key/value head
// shape.kv_head(h). Backward accumulates (+=) into dq, dk, dv; dpreatt and datt are scratch.
#include <algorithm>
#include <cstddef>
#include <limits>

#include "kernels/softmax_math.hpp"
#include "train/ops/cpu_ops.hpp"

namespace parbench {

void CpuOps::gqa_attention_forward(float* out, float* preatt, float* att, const float* q, const float* k,
                                   const float* v, const GqaShape& s) {
    const float scale = attention_scale(s.hs);
    for (std::size_t b = 0; b < static_cast<std::size_t>(s.B); ++b)
        for (std::size_t h = 0; h < static_cast<std::size_t>(s.NH); ++h) {
            const std::size_t j = static_cast<std::size_t>(s.kv_head(static_cast<int>(h)));
            for (std::size_t t = 0; t < static_cast<std::size_t>(s.T); ++t) {
                const float* qt = q + s.q_index(b, t, h, 0);
                float* pre = preatt + s.score_row(b, h, t);
                float* a = att + s.score_row(b, h, t);
                float row_max = -std::numeric_limits<float>::infinity();
                for (std::size_t t2 = 0; t2 <= t; ++t2) {
                    const float* kt = k + s.kv_index(b, t2, j, 0);
                    float dot = 0.0f;
                    for (int i = 0; i < s.hs; ++i) dot += qt[i] * kt[i];
                    pre[t2] = dot * scale;
                    row_max = std::max(row_max, pre[t2]);
                }
                float sum = 0.0f;
                for (std::size_t t2 = 0; t2 <= t; ++t2) {
                    a[t2] = softmax_term(pre[t2], row_max);
                    sum += a[t2];
                }
                for (std::size_t t2 = 0; t2 <= t; ++t2) a[t2] /= sum;
                std::fill(pre + t + 1, pre + s.T, 0.0f);
                std::fill(a + t + 1, a + s.T, 0.0f);
                float* y = out + s.q_index(b, t, h, 0);
                std::fill(y, y + s.hs, 0.0f);
                for (std::size_t t2 = 0; t2 <= t; ++t2) {
                    const float* vt = v + s.kv_index(b, t2, j, 0);
                    for (int i = 0; i < s.hs; ++i) y[i] += a[t2] * vt[i];
                }
            }
        }
}

void CpuOps::gqa_attention_backward(float* dq, float* dk, float* dv, float* dpreatt, float* datt, const float* dout,
                                    const float* q, const float* k, const float* v, const float* att,
                                    const GqaShape& s) {
    const float scale = attention_scale(s.hs);
    for (std::size_t b = 0; b < static_cast<std::size_t>(s.B); ++b)
        for (std::size_t h = 0; h < static_cast<std::size_t>(s.NH); ++h) {
            const std::size_t j = static_cast<std::size_t>(s.kv_head(static_cast<int>(h)));
            for (std::size_t t = 0; t < static_cast<std::size_t>(s.T); ++t) {
                const float* a = att + s.score_row(b, h, t);
                float* da = datt + s.score_row(b, h, t);
                float* dpre = dpreatt + s.score_row(b, h, t);
                const float* dy = dout + s.q_index(b, t, h, 0);
                std::fill(da, da + s.T, 0.0f);
                std::fill(dpre, dpre + s.T, 0.0f);
                for (std::size_t t2 = 0; t2 <= t; ++t2) {
                    const float* vt = v + s.kv_index(b, t2, j, 0);
                    float* dvt = dv + s.kv_index(b, t2, j, 0);
                    for (int i = 0; i < s.hs; ++i) {
                        da[t2] += vt[i] * dy[i];
                        dvt[i] += a[t2] * dy[i];
                    }
                }
                float sum_a_da = 0.0f;
                for (std::size_t t2 = 0; t2 <= t; ++t2) sum_a_da += a[t2] * da[t2];
                for (std::size_t t2 = 0; t2 <= t; ++t2) dpre[t2] = softmax_input_gradient(a[t2], da[t2], sum_a_da);
                const float* qt = q + s.q_index(b, t, h, 0);
                float* dqt = dq + s.q_index(b, t, h, 0);
                for (std::size_t t2 = 0; t2 <= t; ++t2) {
                    const float* kt = k + s.kv_index(b, t2, j, 0);
                    float* dkt = dk + s.kv_index(b, t2, j, 0);
                    for (int i = 0; i < s.hs; ++i) {
                        dqt[i] += dpre[t2] * kt[i] * scale;
                        dkt[i] += dpre[t2] * qt[i] * scale;
                    }
                }
            }
        }
}

}  // namespace parbench
