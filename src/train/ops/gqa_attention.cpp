// Causal grouped-query attention on the CPU: per (batch, query head), the GEMMs of
// attention_heads.cpp, query head h reading key/value head shape.kv_head(h) in place.
// Backward accumulates (+=) into dq, dk, dv; dpreatt and datt are scratch.
#include <cstddef>

#include "train/ops/attention_heads.hpp"
#include "train/ops/cpu_ops.hpp"

namespace parbench {
namespace {

AttentionHead head_of(const float* q, const float* k, const float* v, std::size_t b, std::size_t h,
                      const GqaShape& s) {
    const auto j = static_cast<std::size_t>(s.kv_head(static_cast<int>(h)));
    return AttentionHead{s.T,          s.hs,         q + s.q_index(b, 0, h, 0), k + s.kv_index(b, 0, j, 0),
                         v + s.kv_index(b, 0, j, 0), s.q_width(), s.kv_width(), s.kv_width(), s.q_width()};
}

}  // namespace

void CpuOps::gqa_attention_forward(float* out, float* preatt, float* att, const float* q, const float* k,
                                   const float* v, const GqaShape& s) {
    for (std::size_t b = 0; b < static_cast<std::size_t>(s.B); ++b)
        for (std::size_t h = 0; h < static_cast<std::size_t>(s.NH); ++h)
            attention_head_forward(kernels_, head_of(q, k, v, b, h, s), out + s.q_index(b, 0, h, 0),
                                   preatt + s.score_row(b, h, 0), att + s.score_row(b, h, 0));
}

void CpuOps::gqa_attention_backward(float* dq, float* dk, float* dv, float* dpreatt, float* datt, const float* dout,
                                    const float* q, const float* k, const float* v, const float* att,
                                    const GqaShape& s) {
    for (std::size_t b = 0; b < static_cast<std::size_t>(s.B); ++b)
        for (std::size_t h = 0; h < static_cast<std::size_t>(s.NH); ++h) {
            const auto j = static_cast<std::size_t>(s.kv_head(static_cast<int>(h)));
            attention_head_backward(kernels_, head_of(q, k, v, b, h, s), dq + s.q_index(b, 0, h, 0),
                                    dk + s.kv_index(b, 0, j, 0), dv + s.kv_index(b, 0, j, 0),
                                    dpreatt + s.score_row(b, h, 0), datt + s.score_row(b, h, 0),
                                    dout + s.q_index(b, 0, h, 0), att + s.score_row(b, h, 0));
        }
}

}  // namespace parbench
