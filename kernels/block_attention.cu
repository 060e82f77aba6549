// Blockwise attention on the GPU (ring attention's pieces), in the plain style of
// gqa_attention.cu: a thread per score or output element, a warp per query row, no tiling in
// shared memory and no atomics (deterministic). The formulas are kernels/
// block_attention_math.hpp's, which the CPU ops call too. Backward accumulates (+=) into dq,
// dk, dv; score tiles are scratch.
#include "core/nvtx.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/block_attention_math.hpp"
#include "kernels/ops_kernel_support.cuh"
#include "kernels/ops_launchers.hpp"
#include "kernels/softmax_math.hpp"

namespace parbench {
namespace {

using namespace ops_kernels;

// Decodes a tile index of (B,NH,rows,cols) into (b, h, t, t2).
struct TileIndex {
    std::size_t b, h, t, t2;
    __device__ TileIndex(std::size_t n, const AttentionBlock& a)
        : b(n / a.cols / a.rows / a.NH), h((n / a.cols / a.rows) % a.NH), t((n / a.cols) % a.rows), t2(n % a.cols) {}
    __device__ bool visible(const AttentionBlock& a) const {
        return static_cast<int>(t2) < a.visible_keys(static_cast<int>(t));
    }
};

// Decodes an element of the block's queries, (B,rows,NH,hs), into (b, t, h, i).
struct QueryElement {
    std::size_t b, t, h;
    int i;
    __device__ QueryElement(std::size_t n, const AttentionBlock& a)
        : b(n / a.hs / a.NH / a.rows), t((n / a.hs / a.NH) % a.rows), h((n / a.hs) % a.NH), i(static_cast<int>(n % a.hs)) {}
};

// Decodes a query row of the block, (B,rows,NH), into (b, t, h).
struct QueryRow {
    std::size_t b, t, h;
    __device__ QueryRow(std::size_t r, const AttentionBlock& a) : b(r / a.NH / a.rows), t((r / a.NH) % a.rows), h(r % a.NH) {}
};

// scores[b,h,t,t2] = scale q[b,t,h] · k[b,t2,kv(h)] where query t sees key t2
__global__ void block_scores_kernel(float* scores, const float* q, const float* k, AttentionBlock a, float scale) {
    for (std::size_t n = global_thread(); n < a.tile_elements(); n += grid_threads()) {
        const TileIndex x(n, a);
        scores[n] = x.visible(a) ? block_score(q + a.q_offset(x.b, x.t, x.h),
                                               k + a.kv_offset(x.b, x.t2, a.kv_head(static_cast<int>(x.h))), a.hs,
                                               scale)
                                 : 0.0f;
    }
}

// A warp per query row: part_max = max of the visible scores, the scores turned in place into
// exp(s - max), part_sum their sum.
__global__ void block_row_softmax_kernel(float* part_max, float* part_sum, float* scores, AttentionBlock a) {
    for (std::size_t r = global_warp(); r < a.query_rows(); r += grid_warps()) {
        const QueryRow x(r, a);
        const int keys = a.visible_keys(static_cast<int>(x.t));
        float* row = scores + a.tile_index(x.b, x.h, x.t, 0);
        float row_max = -INFINITY;
        for (int t2 = lane(); t2 < keys; t2 += 32) row_max = fmaxf(row_max, row[t2]);
        row_max = warp_max(row_max);
        float row_sum = 0.0f;
        for (int t2 = lane(); t2 < keys; t2 += 32) {
            row[t2] = softmax_term(row[t2], row_max);
            row_sum += row[t2];
        }
        row_sum = warp_sum(row_sum);
        if (lane() == 0) {
            part_max[a.stat_index(x.b, x.t, x.h)] = row_max;
            part_sum[a.stat_index(x.b, x.t, x.h)] = row_sum;
        }
    }
}

// part_out[b,t,h,i] = sum over visible t2 of exp(s - max)[b,h,t,t2] v[b,t2,kv(h),i]
__global__ void block_values_kernel(float* part_out, const float* terms, const float* v, AttentionBlock a) {
    for (std::size_t n = global_thread(); n < a.q_elements(); n += grid_threads()) {
        const QueryElement x(n, a);
        const std::size_t j = a.kv_head(static_cast<int>(x.h));
        const float* row = terms + a.tile_index(x.b, x.h, x.t, 0);
        const int keys = a.visible_keys(static_cast<int>(x.t));
        float y = 0.0f;
        for (int t2 = 0; t2 < keys; ++t2) y += row[t2] * v[a.kv_offset(x.b, t2, j) + x.i];
        part_out[a.out_offset(x.b, x.t, x.h) + x.i] = y;
    }
}

// A warp per query row: the running output rescaled and the partial added; the row's new
// statistics are written after every lane has read the old ones.
__global__ void block_merge_kernel(float* out, float* row_max, float* row_sum, const float* part_out,
                                   const float* part_max, const float* part_sum, AttentionBlock a) {
    for (std::size_t r = global_warp(); r < a.query_rows(); r += grid_warps()) {
        const QueryRow x(r, a);
        const std::size_t s = a.stat_index(x.b, x.t, x.h);
        const OnlineSoftmaxMerge m = online_softmax_merge(row_max[s], row_sum[s], part_max[s], part_sum[s]);
        float* y = out + a.out_offset(x.b, x.t, x.h);
        const float* p = part_out + a.out_offset(x.b, x.t, x.h);
        for (int i = lane(); i < a.hs; i += 32) y[i] = y[i] * m.running_factor + p[i] * m.partial_factor;
        __syncwarp();
        if (lane() == 0) {
            row_max[s] = m.row_max;
            row_sum[s] = m.row_sum;
        }
    }
}

// A warp per row of hs floats: out /= sum, lse = max + log(sum).
__global__ void block_finish_kernel(float* out, float* lse, const float* row_max, const float* row_sum,
                                    std::size_t rows, int hs) {
    for (std::size_t r = global_warp(); r < rows; r += grid_warps()) {
        for (int i = lane(); i < hs; i += 32) out[r * hs + i] /= row_sum[r];
        if (lane() == 0) lse[r] = log_sum_exp(row_max[r], row_sum[r]);
    }
}

// A warp per row of hs floats: delta = sum dout * out.
__global__ void block_delta_kernel(float* delta, const float* dout, const float* out, std::size_t rows, int hs) {
    for (std::size_t r = global_warp(); r < rows; r += grid_warps()) {
        float sum = 0.0f;
        for (int i = lane(); i < hs; i += 32) sum += dout[r * hs + i] * out[r * hs + i];
        sum = warp_sum(sum);
        if (lane() == 0) delta[r] = sum;
    }
}

// Per visible score: P = exp(s - lse) recomputed, dS = P (dout · v - D); 0 where masked.
__global__ void block_score_gradients_kernel(float* probabilities, float* dscores, const float* dout, const float* q,
                                             const float* k, const float* v, const float* lse, const float* delta,
                                             AttentionBlock a, float scale) {
    for (std::size_t n = global_thread(); n < a.tile_elements(); n += grid_threads()) {
        const TileIndex x(n, a);
        if (!x.visible(a)) {
            probabilities[n] = 0.0f;
            dscores[n] = 0.0f;
            continue;
        }
        const std::size_t qo = a.q_offset(x.b, x.t, x.h), oo = a.out_offset(x.b, x.t, x.h);
        const std::size_t ko = a.kv_offset(x.b, x.t2, a.kv_head(static_cast<int>(x.h)));
        const std::size_t s = a.stat_index(x.b, x.t, x.h);
        const float p = block_probability(block_score(q + qo, k + ko, a.hs, scale), lse[s]);
        float dp = 0.0f;
        for (int i = 0; i < a.hs; ++i) dp += dout[oo + i] * v[ko + i];
        probabilities[n] = p;
        dscores[n] = softmax_input_gradient(p, dp, delta[s]);
    }
}

// dq[b,t,h,i] += scale sum over visible t2 of dS[b,h,t,t2] k[b,t2,kv(h),i]
__global__ void block_dq_kernel(float* dq, const float* dscores, const float* k, AttentionBlock a, float scale) {
    for (std::size_t n = global_thread(); n < a.q_elements(); n += grid_threads()) {
        const QueryElement x(n, a);
        const std::size_t j = a.kv_head(static_cast<int>(x.h));
        const float* row = dscores + a.tile_index(x.b, x.h, x.t, 0);
        const int keys = a.visible_keys(static_cast<int>(x.t));
        float grad = 0.0f;
        for (int t2 = 0; t2 < keys; ++t2) grad += row[t2] * k[a.kv_offset(x.b, t2, j) + x.i];
        dq[a.q_offset(x.b, x.t, x.h) + x.i] += grad * scale;
    }
}

// Over the block's query heads h reading key/value head j and its queries t that see key t2:
//   dk[b,t2,j,i] += scale sum dS[b,h,t,t2] q[b,t,h,i],  dv[b,t2,j,i] += sum P[b,h,t,t2] dout[b,t,h,i]
__global__ void block_dkv_kernel(float* dk, float* dv, const float* probabilities, const float* dscores,
                                 const float* dout, const float* q, AttentionBlock a, float scale) {
    const std::size_t width = static_cast<std::size_t>(a.NKV) * a.hs;
    for (std::size_t n = global_thread(); n < a.kv_elements(); n += grid_threads()) {
        const int i = static_cast<int>(n % a.hs);
        const std::size_t j = (n % width) / a.hs, t2 = (n / width) % a.cols, b = n / width / a.cols;
        const std::size_t first_query = a.mask == BlockMask::causal ? t2 : 0;
        float grad_k = 0.0f, grad_v = 0.0f;
        for (std::size_t h = 0; h < static_cast<std::size_t>(a.NH); ++h) {
            if (static_cast<std::size_t>(a.kv_head(static_cast<int>(h))) != j) continue;
            for (std::size_t t = first_query; t < static_cast<std::size_t>(a.rows); ++t) {
                const std::size_t tile = a.tile_index(b, h, t, t2);
                grad_k += dscores[tile] * q[a.q_offset(b, t, h) + i];
                grad_v += probabilities[tile] * dout[a.out_offset(b, t, h) + i];
            }
        }
        const std::size_t o = a.kv_offset(b, t2, j) + i;
        dk[o] += grad_k * scale;
        dv[o] += grad_v;
    }
}

}  // namespace

void launch_block_attention_forward(float* part_out, float* part_max, float* part_sum, float* scores, const float* q,
                                    const float* k, const float* v, const AttentionBlock& a, GpuStream stream) {
    NvtxRange range("block_attention_forward");
    block_scores_kernel<<<blocks_for(a.tile_elements()), threads_per_block, 0, stream>>>(scores, q, k, a,
                                                                                         attention_scale(a.hs));
    check_cuda(cudaGetLastError(), "block_scores_kernel launch");
    block_row_softmax_kernel<<<blocks_for_rows(a.query_rows()), threads_per_block, 0, stream>>>(part_max, part_sum,
                                                                                                 scores, a);
    check_cuda(cudaGetLastError(), "block_row_softmax_kernel launch");
    block_values_kernel<<<blocks_for(a.q_elements()), threads_per_block, 0, stream>>>(part_out, scores, v, a);
    check_cuda(cudaGetLastError(), "block_values_kernel launch");
}

void launch_block_attention_merge(float* out, float* row_max, float* row_sum, const float* part_out,
                                  const float* part_max, const float* part_sum, const AttentionBlock& a,
                                  GpuStream stream) {
    NvtxRange range("block_attention_merge");
    block_merge_kernel<<<blocks_for_rows(a.query_rows()), threads_per_block, 0, stream>>>(out, row_max, row_sum,
                                                                                           part_out, part_max,
                                                                                           part_sum, a);
    check_cuda(cudaGetLastError(), "block_merge_kernel launch");
}

void launch_block_attention_finish(float* out, float* lse, const float* row_max, const float* row_sum,
                                   std::size_t rows, int hs, GpuStream stream) {
    NvtxRange range("block_attention_finish");
    block_finish_kernel<<<blocks_for_rows(rows), threads_per_block, 0, stream>>>(out, lse, row_max, row_sum, rows,
                                                                                  hs);
    check_cuda(cudaGetLastError(), "block_finish_kernel launch");
}

void launch_block_attention_delta(float* delta, const float* dout, const float* out, std::size_t rows, int hs,
                                  GpuStream stream) {
    NvtxRange range("block_attention_delta");
    block_delta_kernel<<<blocks_for_rows(rows), threads_per_block, 0, stream>>>(delta, dout, out, rows, hs);
    check_cuda(cudaGetLastError(), "block_delta_kernel launch");
}

void launch_block_attention_backward(float* dq, float* dk, float* dv, float* scratch, const float* dout,
                                     const float* q, const float* k, const float* v, const float* lse,
                                     const float* delta, const AttentionBlock& a, GpuStream stream) {
    NvtxRange range("block_attention_backward");
    const float scale = attention_scale(a.hs);
    float* probabilities = scratch;
    float* dscores = scratch + a.tile_elements();
    block_score_gradients_kernel<<<blocks_for(a.tile_elements()), threads_per_block, 0, stream>>>(
        probabilities, dscores, dout, q, k, v, lse, delta, a, scale);
    check_cuda(cudaGetLastError(), "block_score_gradients_kernel launch");
    block_dq_kernel<<<blocks_for(a.q_elements()), threads_per_block, 0, stream>>>(dq, dscores, k, a, scale);
    check_cuda(cudaGetLastError(), "block_dq_kernel launch");
    block_dkv_kernel<<<blocks_for(a.kv_elements()), threads_per_block, 0, stream>>>(dk, dv, probabilities, dscores,
                                                                                    dout, q, a, scale);
    check_cuda(cudaGetLastError(), "block_dkv_kernel launch");
}

}  // namespace parbench
