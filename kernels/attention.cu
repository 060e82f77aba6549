// Causal multi-head attention on the GPU, written for clarity over speed: each output element
// gets one thread (scores, values, d qkv) or each score row one warp (softmax), with no
// shared-memory tiling and no atomics, so results are deterministic. A flash-attention style
// fused kernel is the fast path, left for when attention shows up in the step profile.
// qkv rows are [q (C) | k (C) | v (C)], NH heads of size hs = C/NH contiguous inside each.
// Backward accumulates (+=) into dqkv; dpreatt and datt are scratch and overwritten.
#include "core/nvtx.hpp"
#include "device/cuda_check.hpp"
#include "kernels/ops_kernel_support.cuh"
#include "kernels/ops_launchers.hpp"
#include "kernels/softmax_math.hpp"

namespace parbench {
namespace {

using namespace ops_kernels;

// Indices of one attention problem, decoded once per thread.
struct AttentionShape {
    int B, T, C, NH, hs;
    __device__ std::size_t qkv_index(std::size_t b, std::size_t t, int part, std::size_t h, int i) const {
        return (b * T + t) * 3 * static_cast<std::size_t>(C) + part * static_cast<std::size_t>(C) + h * hs + i;
    }
    __device__ std::size_t score_row(std::size_t b, std::size_t h, std::size_t t) const {
        return ((b * NH + h) * T + t) * T;
    }
};

constexpr int query = 0, key = 1, value = 2;

// preatt[b,h,t,t2] = scale * q[b,t,h] · k[b,t2,h] for t2 <= t, else 0
__global__ void attention_scores_kernel(float* preatt, const float* qkv, AttentionShape s, float scale) {
    const std::size_t count = static_cast<std::size_t>(s.B) * s.NH * s.T * s.T;
    for (std::size_t k = global_thread(); k < count; k += grid_threads()) {
        const std::size_t t2 = k % s.T, t = (k / s.T) % s.T, h = (k / s.T / s.T) % s.NH, b = k / s.T / s.T / s.NH;
        float dot = 0.0f;
        if (t2 <= t)
            for (int i = 0; i < s.hs; ++i) dot += qkv[s.qkv_index(b, t, query, h, i)] * qkv[s.qkv_index(b, t2, key, h, i)];
        preatt[k] = dot * scale;
    }
}

// att row = softmax over the first t+1 scores of row (b,h,t); the rest 0. A warp per row.
__global__ void attention_softmax_kernel(float* att, const float* preatt, AttentionShape s) {
    const std::size_t rows = static_cast<std::size_t>(s.B) * s.NH * s.T;
    for (std::size_t r = global_warp(); r < rows; r += grid_warps()) {
        const int t = static_cast<int>(r % s.T);
        const float* pre = preatt + r * s.T;
        float row_max = -INFINITY;
        for (int t2 = lane(); t2 <= t; t2 += 32) row_max = fmaxf(row_max, pre[t2]);
        row_max = warp_max(row_max);
        float sum = 0.0f;
        for (int t2 = lane(); t2 <= t; t2 += 32) sum += softmax_term(pre[t2], row_max);
        sum = warp_sum(sum);
        for (int t2 = lane(); t2 < s.T; t2 += 32) att[r * s.T + t2] = t2 <= t ? softmax_term(pre[t2], row_max) / sum : 0.0f;
    }
}

// out[b,t,h,i] = sum_{t2 <= t} att[b,h,t,t2] v[b,t2,h,i]
__global__ void attention_values_kernel(float* out, const float* att, const float* qkv, AttentionShape s) {
    const std::size_t count = static_cast<std::size_t>(s.B) * s.T * s.C;
    for (std::size_t k = global_thread(); k < count; k += grid_threads()) {
        const int i = static_cast<int>(k % s.hs);
        const std::size_t h = (k % s.C) / s.hs, t = (k / s.C) % s.T, b = k / s.C / s.T;
        const float* a = att + s.score_row(b, h, t);
        float y = 0.0f;
        for (std::size_t t2 = 0; t2 <= t; ++t2) y += a[t2] * qkv[s.qkv_index(b, t2, value, h, i)];
        out[k] = y;
    }
}

// datt[b,h,t,t2] = dout[b,t,h] · v[b,t2,h] for t2 <= t, else 0
__global__ void attention_datt_kernel(float* datt, const float* dout, const float* qkv, AttentionShape s) {
    const std::size_t count = static_cast<std::size_t>(s.B) * s.NH * s.T * s.T;
    for (std::size_t k = global_thread(); k < count; k += grid_threads()) {
        const std::size_t t2 = k % s.T, t = (k / s.T) % s.T, h = (k / s.T / s.T) % s.NH, b = k / s.T / s.T / s.NH;
        float dot = 0.0f;
        if (t2 <= t)
            for (int i = 0; i < s.hs; ++i)
                dot += dout[(b * s.T + t) * s.C + h * s.hs + i] * qkv[s.qkv_index(b, t2, value, h, i)];
        datt[k] = dot;
    }
}

// dpreatt row = softmax backward of the att row. A warp per row.
__global__ void attention_softmax_backward_kernel(float* dpreatt, const float* datt, const float* att,
                                                  AttentionShape s) {
    const std::size_t rows = static_cast<std::size_t>(s.B) * s.NH * s.T;
    for (std::size_t r = global_warp(); r < rows; r += grid_warps()) {
        const float* a = att + r * s.T;
        const float* da = datt + r * s.T;
        float sum_a_da = 0.0f;
        for (int t2 = lane(); t2 < s.T; t2 += 32) sum_a_da += a[t2] * da[t2];  // att is 0 past the diagonal
        sum_a_da = warp_sum(sum_a_da);
        for (int t2 = lane(); t2 < s.T; t2 += 32) dpreatt[r * s.T + t2] = softmax_input_gradient(a[t2], da[t2], sum_a_da);
    }
}

// One thread per element of dqkv (+=):
//   dq[t]  = scale sum_{t2 <= t} dpreatt[t,t2] k[t2]
//   dk[t2] = scale sum_{t >= t2} dpreatt[t,t2] q[t]
//   dv[t2] =       sum_{t >= t2} att[t,t2] dout[t]
__global__ void attention_dqkv_kernel(float* dqkv, const float* dpreatt, const float* att, const float* dout,
                                      const float* qkv, AttentionShape s, float scale) {
    const std::size_t count = static_cast<std::size_t>(s.B) * s.T * 3 * s.C;
    for (std::size_t k = global_thread(); k < count; k += grid_threads()) {
        const std::size_t within = k % (3 * static_cast<std::size_t>(s.C));
        const int part = static_cast<int>(within / s.C);
        const std::size_t h = (within % s.C) / s.hs;
        const int i = static_cast<int>(within % s.hs);
        const std::size_t t = (k / (3 * static_cast<std::size_t>(s.C))) % s.T, b = k / (3 * static_cast<std::size_t>(s.C)) / s.T;
        float grad = 0.0f;
        if (part == query) {
            const float* dpre = dpreatt + s.score_row(b, h, t);
            for (std::size_t t2 = 0; t2 <= t; ++t2) grad += dpre[t2] * qkv[s.qkv_index(b, t2, key, h, i)];
            grad *= scale;
        } else if (part == key) {
            for (std::size_t tq = t; tq < static_cast<std::size_t>(s.T); ++tq)
                grad += dpreatt[s.score_row(b, h, tq) + t] * qkv[s.qkv_index(b, tq, query, h, i)];
            grad *= scale;
        } else {
            for (std::size_t tq = t; tq < static_cast<std::size_t>(s.T); ++tq)
                grad += att[s.score_row(b, h, tq) + t] * dout[(b * s.T + tq) * s.C + h * s.hs + i];
        }
        dqkv[k] += grad;
    }
}

}  // namespace

void launch_attention_forward(float* out, float* preatt, float* att, const float* qkv, int B, int T, int C, int NH,
                              GpuStream stream) {
    NvtxRange range("attention_forward");
    const AttentionShape s{B, T, C, NH, C / NH};
    const float scale = attention_scale(s.hs);
    const std::size_t scores = static_cast<std::size_t>(B) * NH * T * T;
    attention_scores_kernel<<<blocks_for(scores), threads_per_block, 0, stream>>>(preatt, qkv, s, scale);
    check_cuda(cudaGetLastError(), "attention_scores_kernel launch");
    attention_softmax_kernel<<<blocks_for_rows(static_cast<std::size_t>(B) * NH * T), threads_per_block, 0, stream>>>(
        att, preatt, s);
    check_cuda(cudaGetLastError(), "attention_softmax_kernel launch");
    attention_values_kernel<<<blocks_for(static_cast<std::size_t>(B) * T * C), threads_per_block, 0, stream>>>(
        out, att, qkv, s);
    check_cuda(cudaGetLastError(), "attention_values_kernel launch");
}

void launch_attention_backward(float* dqkv, float* dpreatt, float* datt, const float* dout, const float* qkv,
                               const float* att, int B, int T, int C, int NH, GpuStream stream) {
    NvtxRange range("attention_backward");
    const AttentionShape s{B, T, C, NH, C / NH};
    const float scale = attention_scale(s.hs);
    const std::size_t scores = static_cast<std::size_t>(B) * NH * T * T;
    attention_datt_kernel<<<blocks_for(scores), threads_per_block, 0, stream>>>(datt, dout, qkv, s);
    check_cuda(cudaGetLastError(), "attention_datt_kernel launch");
    attention_softmax_backward_kernel<<<blocks_for_rows(static_cast<std::size_t>(B) * NH * T), threads_per_block, 0,
                                        stream>>>(dpreatt, datt, att, s);
    check_cuda(cudaGetLastError(), "attention_softmax_backward_kernel launch");
    attention_dqkv_kernel<<<blocks_for(static_cast<std::size_t>(B) * T * 3 * C), threads_per_block, 0, stream>>>(
        dqkv, dpreatt, att, dout, qkv, s, scale);
    check_cuda(cudaGetLastError(), "attention_dqkv_kernel launch");
}

}  // namespace parbench
