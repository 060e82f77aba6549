// RMSNorm on the GPU with the shared formulas of rmsnorm_math.hpp: a warp per row for the
// forward and for dinp; column_sums (ops_kernel_support.cuh) for dweight (no atomics,
// deterministic). Backward accumulates (+=).
#include "core/nvtx.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/ops_kernel_support.cuh"
#include "kernels/ops_launchers.hpp"
#include "kernels/rmsnorm_math.hpp"

namespace parbench {
namespace {

using namespace ops_kernels;

__global__ void rmsnorm_forward_kernel(float* out, float* rstd, const float* inp, const float* weight, int N, int C,
                                       float eps) {
    for (std::size_t n = global_warp(); n < static_cast<std::size_t>(N); n += grid_warps()) {
        const float* x = inp + n * C;
        float squares = 0.0f;
        for (int c = lane(); c < C; c += 32) squares += x[c] * x[c];
        const float s = rmsnorm_rstd(warp_sum(squares) / C, eps);
        float* y = out + n * C;
        for (int c = lane(); c < C; c += 32) y[c] = x[c] * s * weight[c];
        if (lane() == 0) rstd[n] = s;
    }
}

__global__ void rmsnorm_input_backward_kernel(float* dinp, const float* dout, const float* inp, const float* weight,
                                              const float* rstd, int N, int C) {
    for (std::size_t n = global_warp(); n < static_cast<std::size_t>(N); n += grid_warps()) {
        const float* x = inp + n * C;
        const float* dy = dout + n * C;
        const float s = rstd[n];
        float sum_g_xhat = 0.0f;
        for (int c = lane(); c < C; c += 32) sum_g_xhat += dy[c] * weight[c] * x[c] * s;
        const float mean_g_xhat = warp_sum(sum_g_xhat) / C;
        float* dx = dinp + n * C;
        for (int c = lane(); c < C; c += 32)
            dx[c] += rmsnorm_input_gradient(dy[c] * weight[c], x[c] * s, mean_g_xhat, s);
    }
}

__global__ void __launch_bounds__(column_sum_threads)
    rmsnorm_weight_backward_kernel(float* dweight, const float* dout, const float* inp, const float* rstd, int N,
                                   int C) {
    const auto columns = static_cast<std::size_t>(C);
    column_sums<1>(
        static_cast<std::size_t>(N), columns,
        [&](std::size_t n, std::size_t c, float* sums) {
            sums[0] += dout[n * columns + c] * inp[n * columns + c] * rstd[n];
        },
        [&](std::size_t c, const float* totals) { dweight[c] += totals[0]; });
}

}  // namespace

void launch_rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C, float eps,
                            GpuStream stream) {
    NvtxRange range("rmsnorm_forward");
    rmsnorm_forward_kernel<<<blocks_for_rows(N), threads_per_block, 0, stream>>>(out, rstd, inp, weight, N, C, eps);
    check_cuda(cudaGetLastError(), "rmsnorm_forward_kernel launch");
}

void launch_rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                             const float* rstd, int N, int C, GpuStream stream) {
    NvtxRange range("rmsnorm_backward");
    rmsnorm_input_backward_kernel<<<blocks_for_rows(N), threads_per_block, 0, stream>>>(dinp, dout, inp, weight, rstd,
                                                                                        N, C);
    check_cuda(cudaGetLastError(), "rmsnorm_input_backward_kernel launch");
    rmsnorm_weight_backward_kernel<<<blocks_for_columns(C), column_sum_threads, 0, stream>>>(dweight, dout, inp, rstd,
                                                                                             N, C);
    check_cuda(cudaGetLastError(), "rmsnorm_weight_backward_kernel launch");
}

}  // namespace parbench
