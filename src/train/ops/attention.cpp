// Causal multi-head self-attention on the CPU: per (batch, head), the GEMMs of
// attention_heads.cpp on the head's columns of qkv, read in place.
// qkv rows are [q (C) | k (C) | v (C)] with NH heads of size hs = C/NH contiguous inside each.
// Backward accumulates (+=) into dqkv; dpreatt and datt are scratch and overwritten.
#include <cstddef>

#include "train/ops/attention_heads.hpp"
#include "train/ops/cpu_ops.hpp"

namespace parbench {
namespace {

AttentionHead head_of(const float* qkv, std::size_t b, std::size_t h, int T, int C, int NH) {
    const int hs = C / NH;
    const std::size_t C3 = 3 * static_cast<std::size_t>(C);
    const float* q = qkv + b * static_cast<std::size_t>(T) * C3 + h * static_cast<std::size_t>(hs);
    return AttentionHead{T, hs, q, q + C, q + 2 * static_cast<std::size_t>(C), C3, C3, C3, static_cast<std::size_t>(C)};
}

}  // namespace

// out (B,T,C), preatt (B,NH,T,T), att (B,NH,T,T); qkv (B,T,3C)
void CpuOps::attention_forward(float* out, float* preatt, float* att, const float* qkv, int B, int T, int C, int NH) {
    const std::size_t hs = static_cast<std::size_t>(C / NH), TT = static_cast<std::size_t>(T) * T;
    for (std::size_t b = 0; b < static_cast<std::size_t>(B); ++b)
        for (std::size_t h = 0; h < static_cast<std::size_t>(NH); ++h) {
            const std::size_t scores = (b * NH + h) * TT;
            attention_head_forward(kernels_, head_of(qkv, b, h, T, C, NH), out + b * T * C + h * hs, preatt + scores,
                                   att + scores);
        }
}

void CpuOps::attention_backward(float* dqkv, float* dpreatt, float* datt, const float* dout, const float* qkv,
                                const float* att, int B, int T, int C, int NH) {
    const std::size_t hs = static_cast<std::size_t>(C / NH), TT = static_cast<std::size_t>(T) * T;
    for (std::size_t b = 0; b < static_cast<std::size_t>(B); ++b)
        for (std::size_t h = 0; h < static_cast<std::size_t>(NH); ++h) {
            const AttentionHead head = head_of(qkv, b, h, T, C, NH);
            // the same offsets in dqkv as in qkv
            float* dq = dqkv + (head.q - qkv);
            const std::size_t scores = (b * NH + h) * TT;
            attention_head_backward(kernels_, head, dq, dq + C, dq + 2 * static_cast<std::size_t>(C),
                                    dpreatt + scores, datt + scores, dout + b * T * C + h * hs, att + scores);
        }
}

}  // namespace parbench
