// Causal attention of one (batch, head) pair on the CPU as GEMMs, shared by multi-head
// attention (attention.cpp: q, k, v inside one qkv row) and grouped-query attention
// (gqa_attention.cpp: several query heads reading one key/value head). Row-major operands with
// leading dimensions, so a head is read in place, without copies.
#pragma once

#include <cstddef>

#include "device/cpu_kernels.hpp"

namespace parbench {

struct AttentionHead {
    int T = 1, hs = 1;
    const float* q = nullptr;  // (T, hs), row stride ldq
    const float* k = nullptr;  // (T, hs), row stride ldk
    const float* v = nullptr;  // (T, hs), row stride ldv
    std::size_t ldq = 0, ldk = 0, ldv = 0;
    std::size_t ldo = 0;  // row stride of out and dout
};

// out (T, hs, stride ldo) = softmax(scale q kᵀ, causal) v; preatt and att (T, T) get the
// scaled scores and the probabilities, 0 right of the diagonal. `kernels`: the softmax rows' path.
void attention_head_forward(CpuKernels kernels, const AttentionHead& head, float* out, float* preatt, float* att);

// Accumulates (+=) into dq, dk, dv (the strides of q, k, v); dpreatt and datt (T, T) are
// overwritten with d scores and d probabilities, 0 right of the diagonal.
void attention_head_backward(CpuKernels kernels, const AttentionHead& head, float* dq, float* dk, float* dv,
                             float* dpreatt, float* datt, const float* dout, const float* att);

}  // namespace parbench
