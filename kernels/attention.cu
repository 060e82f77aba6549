// Causal multi-head attention's softmax on the GPU, between the cuBLAS GEMMs of
// CudaOps::attention_forward/backward (src/train/ops/cuda_ops_cuda.cpp), which compute the
// full T x T scores of every head: a warp per score row, masking the keys a query does not
// see. Scores, probabilities and their gradients are (B, NH, T, T), rows contiguous; the
// conventions are the CPU ops' (train/ops/attention_heads.cpp): past the diagonal preatt, att
// and dpreatt hold 0.
#include "core/nvtx.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/ops_kernel_support.cuh"
#include "kernels/ops_launchers.hpp"
#include "kernels/softmax_math.hpp"

namespace parbench {
namespace {

using namespace ops_kernels;

// Row (b,h,t): att = softmax over its first t+1 scores, 0 after; the scores past the
// diagonal (the GEMM computed them) are set to 0.
__global__ void attention_softmax_kernel(float* att, float* preatt, std::size_t rows, int T) {
    for (std::size_t r = global_warp(); r < rows; r += grid_warps()) {
        const int t = static_cast<int>(r % T);
        float* pre = preatt + r * T;
        float* a = att + r * T;
        float row_max = -INFINITY;
        for (int t2 = lane(); t2 <= t; t2 += 32) row_max = fmaxf(row_max, pre[t2]);
        row_max = warp_max(row_max);
        float sum = 0.0f;
        for (int t2 = lane(); t2 <= t; t2 += 32) sum += softmax_term(pre[t2], row_max);
        sum = warp_sum(sum);
        for (int t2 = lane(); t2 < T; t2 += 32) {
            const bool seen = t2 <= t;
            a[t2] = seen ? softmax_term(pre[t2], row_max) / sum : 0.0f;
            if (!seen) pre[t2] = 0.0f;
        }
    }
}

// Row (b,h,t): dpreatt = the softmax's input gradient from att and datt (0 past the diagonal,
// where att is 0).
__global__ void attention_softmax_backward_kernel(float* dpreatt, const float* datt, const float* att,
                                                  std::size_t rows, int T) {
    for (std::size_t r = global_warp(); r < rows; r += grid_warps()) {
        const int t = static_cast<int>(r % T);
        const float* a = att + r * T;
        const float* da = datt + r * T;
        float sum_a_da = 0.0f;
        for (int t2 = lane(); t2 <= t; t2 += 32) sum_a_da += a[t2] * da[t2];
        sum_a_da = warp_sum(sum_a_da);
        for (int t2 = lane(); t2 < T; t2 += 32)
            dpreatt[r * T + t2] = t2 <= t ? softmax_input_gradient(a[t2], da[t2], sum_a_da) : 0.0f;
    }
}

}  // namespace

void launch_attention_softmax(float* att, float* preatt, int B, int NH, int T, GpuStream stream) {
    NvtxRange range("attention_softmax");
    const std::size_t rows = static_cast<std::size_t>(B) * NH * T;
    attention_softmax_kernel<<<blocks_for_rows(rows), threads_per_block, 0, stream>>>(att, preatt, rows, T);
    check_cuda(cudaGetLastError(), "attention_softmax_kernel launch");
}

void launch_attention_softmax_backward(float* dpreatt, const float* datt, const float* att, int B, int NH, int T,
                                       GpuStream stream) {
    NvtxRange range("attention_softmax_backward");
    const std::size_t rows = static_cast<std::size_t>(B) * NH * T;
    attention_softmax_backward_kernel<<<blocks_for_rows(rows), threads_per_block, 0, stream>>>(dpreatt, datt, att,
                                                                                             rows, T);
    check_cuda(cudaGetLastError(), "attention_softmax_backward_kernel launch");
}

}  // namespace parbench
