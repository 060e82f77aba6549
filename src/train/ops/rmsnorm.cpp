// RMSNorm on the CPU. Backward accumulates (+=) into dinp and dweight. Row sums in simd.hpp's
// fixed lane order, so the loops vectorise and give the same bits on every x86-64.
#include <cstddef>

#include "kernels/rmsnorm_math.hpp"
#include "train/ops/cpu_ops.hpp"
#include "train/ops/cpu_simd.hpp"

namespace parbench {
namespace {

PARBENCH_SIMD_LOOP void rmsnorm_forward_rows(float* __restrict out, float* __restrict rstd,
                                             const float* __restrict inp, const float* __restrict weight,
                                             std::size_t N, std::size_t C, float eps) {
    for (std::size_t n = 0; n < N; ++n) {
        const float* __restrict x = inp + n * C;
        const float squares = simd::lane_sum(C, [&](std::size_t c) { return x[c] * x[c]; });
        const float s = rmsnorm_rstd(squares / static_cast<float>(C), eps);
        float* __restrict y = out + n * C;
        for (std::size_t c = 0; c < C; ++c) y[c] = x[c] * s * weight[c];
        rstd[n] = s;
    }
}

PARBENCH_SIMD_LOOP void rmsnorm_backward_rows(float* __restrict dinp, float* __restrict dweight,
                                              const float* __restrict dout, const float* __restrict inp,
                                              const float* __restrict weight, const float* __restrict rstd,
                                              std::size_t N, std::size_t C) {
    for (std::size_t n = 0; n < N; ++n) {
        const float* __restrict x = inp + n * C;
        const float* __restrict dy = dout + n * C;
        const float s = rstd[n];
        const float sum_g_xhat = simd::lane_sum(C, [&](std::size_t c) { return dy[c] * weight[c] * x[c] * s; });
        const float mean_g_xhat = sum_g_xhat / static_cast<float>(C);
        float* __restrict dx = dinp + n * C;
        for (std::size_t c = 0; c < C; ++c) {
            const float xhat = x[c] * s;
            dweight[c] += dy[c] * xhat;
            dx[c] += rmsnorm_input_gradient(dy[c] * weight[c], xhat, mean_g_xhat, s);
        }
    }
}

}  // namespace

// out (N,C), rstd (N); inp (N,C), weight (C)
void CpuOps::rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C,
                             float eps) {
    simd::run(kernels_, [&]() PARBENCH_SIMD_BODY {
        rmsnorm_forward_rows(out, rstd, inp, weight, static_cast<std::size_t>(N), static_cast<std::size_t>(C), eps);
    });
}

void CpuOps::rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                              const float* rstd, int N, int C) {
    simd::run(kernels_, [&]() PARBENCH_SIMD_BODY {
        rmsnorm_backward_rows(dinp, dweight, dout, inp, weight, rstd, static_cast<std::size_t>(N),
                              static_cast<std::size_t>(C));
    });
}

}  // namespace parbench
