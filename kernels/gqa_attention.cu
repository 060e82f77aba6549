// Causal grouped-query attention on the GPU, in the plain style of attention.cu (a thread per
// output element, a warp per softmax row, no tiling, no atomics: deterministic). Layouts and
// the query-to-key/value head mapping are GqaShape's (gqa_math.hpp). Backward accumulates
// (+=) into dq, dk, dv; dpreatt and datt are scratch and overwritten.
#include "core/nvtx.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/gqa_math.hpp"
#include "kernels/ops_kernel_support.cuh"
#include "kernels/ops_launchers.hpp"
#include "kernels/softmax_math.hpp"

namespace parbench {
namespace {

using namespace ops_kernels;

// Decodes a score index k of (B,NH,T,T) into (b, h, t, t2).
struct ScoreIndex {
    std::size_t b, h, t, t2;
    __device__ ScoreIndex(std::size_t k, const GqaShape& s)
        : b(k / s.T / s.T / s.NH), h((k / s.T / s.T) % s.NH), t((k / s.T) % s.T), t2(k % s.T) {}
};

// preatt[b,h,t,t2] = scale * q[b,t,h] · k[b,t2,kv(h)] for t2 <= t, else 0
__global__ void gqa_scores_kernel(float* preatt, const float* q, const float* k, GqaShape s, float scale) {
    for (std::size_t n = global_thread(); n < s.score_elements(); n += grid_threads()) {
        const ScoreIndex x(n, s);
        const std::size_t j = s.kv_head(static_cast<int>(x.h));
        float dot = 0.0f;
        if (x.t2 <= x.t)
            for (int i = 0; i < s.hs; ++i) dot += q[s.q_index(x.b, x.t, x.h, i)] * k[s.kv_index(x.b, x.t2, j, i)];
        preatt[n] = dot * scale;
    }
}

// att row = softmax over the first t+1 scores of row (b,h,t); the rest 0. A warp per row.
__global__ void gqa_softmax_kernel(float* att, const float* preatt, GqaShape s) {
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
        for (int t2 = lane(); t2 < s.T; t2 += 32)
            att[r * s.T + t2] = t2 <= t ? softmax_term(pre[t2], row_max) / sum : 0.0f;
    }
}

// out[b,t,h,i] = sum_{t2 <= t} att[b,h,t,t2] v[b,t2,kv(h),i]
__global__ void gqa_values_kernel(float* out, const float* att, const float* v, GqaShape s) {
    for (std::size_t n = global_thread(); n < s.q_elements(); n += grid_threads()) {
        const int i = static_cast<int>(n % s.hs);
        const std::size_t h = (n % s.q_width()) / s.hs, t = (n / s.q_width()) % s.T, b = n / s.q_width() / s.T;
        const std::size_t j = s.kv_head(static_cast<int>(h));
        const float* a = att + s.score_row(b, h, t);
        float y = 0.0f;
        for (std::size_t t2 = 0; t2 <= t; ++t2) y += a[t2] * v[s.kv_index(b, t2, j, i)];
        out[n] = y;
    }
}

// datt[b,h,t,t2] = dout[b,t,h] · v[b,t2,kv(h)] for t2 <= t, else 0
__global__ void gqa_datt_kernel(float* datt, const float* dout, const float* v, GqaShape s) {
    for (std::size_t n = global_thread(); n < s.score_elements(); n += grid_threads()) {
        const ScoreIndex x(n, s);
        const std::size_t j = s.kv_head(static_cast<int>(x.h));
        float dot = 0.0f;
        if (x.t2 <= x.t)
            for (int i = 0; i < s.hs; ++i) dot += dout[s.q_index(x.b, x.t, x.h, i)] * v[s.kv_index(x.b, x.t2, j, i)];
        datt[n] = dot;
    }
}

// dpreatt row = softmax backward of the att row. A warp per row.
__global__ void gqa_softmax_backward_kernel(float* dpreatt, const float* datt, const float* att, GqaShape s) {
    const std::size_t rows = static_cast<std::size_t>(s.B) * s.NH * s.T;
    for (std::size_t r = global_warp(); r < rows; r += grid_warps()) {
        const float* a = att + r * s.T;
        const float* da = datt + r * s.T;
        float sum_a_da = 0.0f;
        for (int t2 = lane(); t2 < s.T; t2 += 32) sum_a_da += a[t2] * da[t2];  // att is 0 past the diagonal
        sum_a_da = warp_sum(sum_a_da);
        for (int t2 = lane(); t2 < s.T; t2 += 32)
            dpreatt[r * s.T + t2] = softmax_input_gradient(a[t2], da[t2], sum_a_da);
    }
}

// dq[b,t,h,i] += scale sum_{t2 <= t} dpreatt[b,h,t,t2] k[b,t2,kv(h),i]
__global__ void gqa_dq_kernel(float* dq, const float* dpreatt, const float* k, GqaShape s, float scale) {
    for (std::size_t n = global_thread(); n < s.q_elements(); n += grid_threads()) {
        const int i = static_cast<int>(n % s.hs);
        const std::size_t h = (n % s.q_width()) / s.hs, t = (n / s.q_width()) % s.T, b = n / s.q_width() / s.T;
        const std::size_t j = s.kv_head(static_cast<int>(h));
        const float* dpre = dpreatt + s.score_row(b, h, t);
        float grad = 0.0f;
        for (std::size_t t2 = 0; t2 <= t; ++t2) grad += dpre[t2] * k[s.kv_index(b, t2, j, i)];
        dq[n] += grad * scale;
    }
}

// Over the query heads h that read key/value head j, and the queries t >= t2:
//   dk[b,t2,j,i] += scale sum dpreatt[b,h,t,t2] q[b,t,h,i],  dv[b,t2,j,i] += sum att[b,h,t,t2] dout[b,t,h,i]
__global__ void gqa_dkv_kernel(float* dk, float* dv, const float* dpreatt, const float* att, const float* dout,
                               const float* q, GqaShape s, float scale) {
    for (std::size_t n = global_thread(); n < s.kv_elements(); n += grid_threads()) {
        const int i = static_cast<int>(n % s.hs);
        const std::size_t j = (n % s.kv_width()) / s.hs, t2 = (n / s.kv_width()) % s.T, b = n / s.kv_width() / s.T;
        float grad_k = 0.0f, grad_v = 0.0f;
        for (std::size_t h = 0; h < static_cast<std::size_t>(s.NH); ++h) {
            if (static_cast<std::size_t>(s.kv_head(static_cast<int>(h))) != j) continue;
            for (std::size_t t = t2; t < static_cast<std::size_t>(s.T); ++t) {
                grad_k += dpreatt[s.score_row(b, h, t) + t2] * q[s.q_index(b, t, h, i)];
                grad_v += att[s.score_row(b, h, t) + t2] * dout[s.q_index(b, t, h, i)];
            }
        }
        dk[n] += grad_k * scale;
        dv[n] += grad_v;
    }
}

}  // namespace

void launch_gqa_attention_forward(float* out, float* preatt, float* att, const float* q, const float* k,
                                  const float* v, const GqaShape& s, GpuStream stream) {
    NvtxRange range("gqa_attention_forward");
    const float scale = attention_scale(s.hs);
    gqa_scores_kernel<<<blocks_for(s.score_elements()), threads_per_block, 0, stream>>>(preatt, q, k, s, scale);
    check_cuda(cudaGetLastError(), "gqa_scores_kernel launch");
    gqa_softmax_kernel<<<blocks_for_rows(static_cast<std::size_t>(s.B) * s.NH * s.T), threads_per_block, 0, stream>>>(
        att, preatt, s);
    check_cuda(cudaGetLastError(), "gqa_softmax_kernel launch");
    gqa_values_kernel<<<blocks_for(s.q_elements()), threads_per_block, 0, stream>>>(out, att, v, s);
    check_cuda(cudaGetLastError(), "gqa_values_kernel launch");
}

void launch_gqa_attention_backward(float* dq, float* dk, float* dv, float* dpreatt, float* datt, const float* dout,
                                   const float* q, const float* k, const float* v, const float* att,
                                   const GqaShape& s, GpuStream stream) {
    NvtxRange range("gqa_attention_backward");
    const float scale = attention_scale(s.hs);
    gqa_datt_kernel<<<blocks_for(s.score_elements()), threads_per_block, 0, stream>>>(datt, dout, v, s);
    check_cuda(cudaGetLastError(), "gqa_datt_kernel launch");
    gqa_softmax_backward_kernel<<<blocks_for_rows(static_cast<std::size_t>(s.B) * s.NH * s.T), threads_per_block, 0,
                                  stream>>>(dpreatt, datt, att, s);
    check_cuda(cudaGetLastError(), "gqa_softmax_backward_kernel launch");
    gqa_dq_kernel<<<blocks_for(s.q_elements()), threads_per_block, 0, stream>>>(dq, dpreatt, k, s, scale);
    check_cuda(cudaGetLastError(), "gqa_dq_kernel launch");
    gqa_dkv_kernel<<<blocks_for(s.kv_elements()), threads_per_block, 0, stream>>>(dk, dv, dpreatt, att, dout, q, s,
                                                                                  scale);
    check_cuda(cudaGetLastError(), "gqa_dkv_kernel launch");
}

}  // namespace parbench
