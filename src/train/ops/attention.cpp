// Causal multi-head self-attention on the CPU, direct loops per (batch, head, query).
// qkv rows are [q (C) | k (C) | v (C)] with NH heads of size hs = C/NH contiguous inside each.
// Backward accumulates (+=) into dqkv; dpreatt and datt are scratch and overwritten.
#include <algorithm>
#include <cstddef>
#include <limits>

#include "kernels/softmax_math.hpp"
#include "train/ops/cpu_ops.hpp"

namespace parbench {

// out (B,T,C), preatt (B,NH,T,T), att (B,NH,T,T); qkv (B,T,3C)
void CpuOps::attention_forward(float* out, float* preatt, float* att, const float* qkv, int B, int T, int C, int NH) {
    const int hs = C / NH;
    const float scale = attention_scale(hs);
    const std::size_t C3 = 3 * static_cast<std::size_t>(C);
    for (std::size_t b = 0; b < static_cast<std::size_t>(B); ++b) {
        for (std::size_t h = 0; h < static_cast<std::size_t>(NH); ++h) {
            for (std::size_t t = 0; t < static_cast<std::size_t>(T); ++t) {
                const float* q = qkv + (b * T + t) * C3 + h * hs;
                float* pre = preatt + ((b * NH + h) * T + t) * T;
                float* a = att + ((b * NH + h) * T + t) * T;
                // scores against keys 0..t only: the causal mask
                float row_max = -std::numeric_limits<float>::infinity();
                for (std::size_t t2 = 0; t2 <= t; ++t2) {
                    const float* k = qkv + (b * T + t2) * C3 + C + h * hs;
                    float dot = 0.0f;
                    for (int i = 0; i < hs; ++i) dot += q[i] * k[i];
                    pre[t2] = dot * scale;
                    row_max = std::max(row_max, pre[t2]);
                }
                float sum = 0.0f;
                for (std::size_t t2 = 0; t2 <= t; ++t2) {
                    a[t2] = softmax_term(pre[t2], row_max);
                    sum += a[t2];
                }
                for (std::size_t t2 = 0; t2 <= t; ++t2) a[t2] /= sum;
                std::fill(pre + t + 1, pre + T, 0.0f);
                std::fill(a + t + 1, a + T, 0.0f);

                float* y = out + (b * T + t) * C + h * hs;
                std::fill(y, y + hs, 0.0f);
                for (std::size_t t2 = 0; t2 <= t; ++t2) {
                    const float* v = qkv + (b * T + t2) * C3 + 2 * C + h * hs;
                    for (int i = 0; i < hs; ++i) y[i] += a[t2] * v[i];
                }
            }
        }
    }
}

void CpuOps::attention_backward(float* dqkv, float* dpreatt, float* datt, const float* dout, const float* qkv,
                                const float* att, int B, int T, int C, int NH) {
    const int hs = C / NH;
    const float scale = attention_scale(hs);
    const std::size_t C3 = 3 * static_cast<std::size_t>(C);
    for (std::size_t b = 0; b < static_cast<std::size_t>(B); ++b) {
        for (std::size_t h = 0; h < static_cast<std::size_t>(NH); ++h) {
            for (std::size_t t = 0; t < static_cast<std::size_t>(T); ++t) {
                const float* a = att + ((b * NH + h) * T + t) * T;
                float* da = datt + ((b * NH + h) * T + t) * T;
                float* dpre = dpreatt + ((b * NH + h) * T + t) * T;
                const float* dy = dout + (b * T + t) * C + h * hs;
                std::fill(da, da + T, 0.0f);
                std::fill(dpre, dpre + T, 0.0f);

                // through y = sum_t2 a[t2] v[t2]
                for (std::size_t t2 = 0; t2 <= t; ++t2) {
                    const float* v = qkv + (b * T + t2) * C3 + 2 * C + h * hs;
                    float* dv = dqkv + (b * T + t2) * C3 + 2 * C + h * hs;
                    for (int i = 0; i < hs; ++i) {
                        da[t2] += v[i] * dy[i];
                        dv[i] += a[t2] * dy[i];
                    }
                }
                // through the softmax
                float sum_a_da = 0.0f;
                for (std::size_t t2 = 0; t2 <= t; ++t2) sum_a_da += a[t2] * da[t2];
                for (std::size_t t2 = 0; t2 <= t; ++t2) dpre[t2] = softmax_input_gradient(a[t2], da[t2], sum_a_da);

                // through pre[t2] = scale * q · k[t2]
                const float* q = qkv + (b * T + t) * C3 + h * hs;
                float* dq = dqkv + (b * T + t) * C3 + h * hs;
                for (std::size_t t2 = 0; t2 <= t; ++t2) {
                    const float* k = qkv + (b * T + t2) * C3 + C + h * hs;
                    float* dk = dqkv + (b * T + t2) * C3 + C + h * hs;
                    for (int i = 0; i < hs; ++i) {
                        dq[i] += dpre[t2] * k[i] * scale;
                        dk[i] += dpre[t2] * q[i] * scale;
                    }
                }
            }
        }
    }
}

}  // namespace parbench
