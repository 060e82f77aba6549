// LayerNorm on the GPU with the shared formulas of layernorm_math.hpp. A warp per row for the
// forward and for dinp; column_sums (ops_kernel_support.cuh) for dweight and dbias (no atomics,
// deterministic). Backward accumulates (+=).
#include "core/nvtx.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/layernorm_math.hpp"
#include "kernels/ops_kernel_support.cuh"
#include "kernels/ops_launchers.hpp"

namespace parbench {
namespace {

using namespace ops_kernels;

__global__ void layernorm_forward_kernel(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                                         const float* bias, int N, int C) {
    for (std::size_t n = global_warp(); n < static_cast<std::size_t>(N); n += grid_warps()) {
        const float* x = inp + n * C;
        float sum = 0.0f;
        for (int c = lane(); c < C; c += 32) sum += x[c];
        const float m = warp_sum(sum) / C;
        // two passes, as on the CPU: no cancellation from E[x^2] - E[x]^2
        float squares = 0.0f;
        for (int c = lane(); c < C; c += 32) squares += (x[c] - m) * (x[c] - m);
        const float s = layernorm_rstd(warp_sum(squares) / C);
        float* y = out + n * C;
        for (int c = lane(); c < C; c += 32) y[c] = layernorm_normalize(x[c], m, s) * weight[c] + bias[c];
        if (lane() == 0) {
            mean[n] = m;
            rstd[n] = s;
        }
    }
}

__global__ void layernorm_input_backward_kernel(float* dinp, const float* dout, const float* inp, const float* weight,
                                                const float* mean, const float* rstd, int N, int C) {
    for (std::size_t n = global_warp(); n < static_cast<std::size_t>(N); n += grid_warps()) {
        const float* x = inp + n * C;
        const float* dy = dout + n * C;
        const float m = mean[n];
        const float s = rstd[n];
        float sum_g = 0.0f;
        float sum_g_xhat = 0.0f;
        for (int c = lane(); c < C; c += 32) {
            const float g = dy[c] * weight[c];
            sum_g += g;
            sum_g_xhat += g * layernorm_normalize(x[c], m, s);
        }
        const float mean_g = warp_sum(sum_g) / C;
        const float mean_g_xhat = warp_sum(sum_g_xhat) / C;
        float* dx = dinp + n * C;
        for (int c = lane(); c < C; c += 32)
            dx[c] += layernorm_input_gradient(dy[c] * weight[c], layernorm_normalize(x[c], m, s), mean_g, mean_g_xhat,
                                              s);
    }
}

__global__ void __launch_bounds__(column_sum_threads)
    layernorm_parameter_backward_kernel(float* dweight, float* dbias, const float* dout, const float* inp,
                                        const float* mean, const float* rstd, int N, int C) {
    const auto columns = static_cast<std::size_t>(C);
    column_sums<2>(
        static_cast<std::size_t>(N), columns,
        [&](std::size_t n, std::size_t c, float* sums) {
            const float dy = dout[n * columns + c];
            sums[0] += dy;
            sums[1] += dy * layernorm_normalize(inp[n * columns + c], mean[n], rstd[n]);
        },
        [&](std::size_t c, const float* totals) {
            dbias[c] += totals[0];
            dweight[c] += totals[1];
        });
}

}  // namespace

void launch_layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                              const float* bias, int N, int C, GpuStream stream) {
    NvtxRange range("layernorm_forward");
    layernorm_forward_kernel<<<blocks_for_rows(N), threads_per_block, 0, stream>>>(out, mean, rstd, inp, weight, bias,
                                                                                   N, C);
    check_cuda(cudaGetLastError(), "layernorm_forward_kernel launch");
}

void launch_layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                               const float* weight, const float* mean, const float* rstd, int N, int C,
                               GpuStream stream) {
    NvtxRange range("layernorm_backward");
    layernorm_input_backward_kernel<<<blocks_for_rows(N), threads_per_block, 0, stream>>>(dinp, dout, inp, weight,
                                                                                          mean, rstd, N, C);
    check_cuda(cudaGetLastError(), "layernorm_input_backward_kernel launch");
    layernorm_parameter_backward_kernel<<<blocks_for_columns(C), column_sum_threads, 0, stream>>>(dweight, dbias, dout,
                                                                                                  inp, mean, rstd, N, C);
    check_cuda(cudaGetLastError(), "layernorm_parameter_backward_kernel launch");
}

}  // namespace parbench
