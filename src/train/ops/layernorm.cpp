// LayerNorm on the CPU. Backward accumulates (+=) into dinp, dweight, dbias. Row sums in
// simd.hpp's fixed lane order, so the loops vectorise and give the same bits on every x86-64.
#include <cstddef>

#include "kernels/layernorm_math.hpp"
#include "train/ops/cpu_ops.hpp"
#include "train/ops/cpu_simd.hpp"

namespace parbench {
namespace {

PARBENCH_SIMD_LOOP void layernorm_forward_rows(float* __restrict out, float* __restrict mean,
                                               float* __restrict rstd, const float* __restrict inp,
                                               const float* __restrict weight, const float* __restrict bias,
                                               std::size_t N, std::size_t C) {
    const auto width = static_cast<float>(C);
    for (std::size_t n = 0; n < N; ++n) {
        const float* __restrict x = inp + n * C;
        const float m = simd::lane_sum(C, [&](std::size_t c) { return x[c]; }) / width;
        // Two passes (mean, then squared deviations) rather than E[x^2] - E[x]^2, which
        // cancels badly when the mean is large against the spread.
        const float squares = simd::lane_sum(C, [&](std::size_t c) { return (x[c] - m) * (x[c] - m); });
        const float s = layernorm_rstd(squares / width);
        float* __restrict y = out + n * C;
        for (std::size_t c = 0; c < C; ++c) y[c] = layernorm_normalize(x[c], m, s) * weight[c] + bias[c];
        mean[n] = m;
        rstd[n] = s;
    }
}

PARBENCH_SIMD_LOOP void layernorm_backward_rows(float* __restrict dinp, float* __restrict dweight,
                                                float* __restrict dbias, const float* __restrict dout,
                                                const float* __restrict inp, const float* __restrict weight,
                                                const float* __restrict mean, const float* __restrict rstd,
                                                std::size_t N, std::size_t C) {
    const auto width = static_cast<float>(C);
    for (std::size_t n = 0; n < N; ++n) {
        const float* __restrict x = inp + n * C;
        const float* __restrict dy = dout + n * C;
        const float m = mean[n];
        const float s = rstd[n];
        const float mean_g = simd::lane_sum(C, [&](std::size_t c) { return dy[c] * weight[c]; }) / width;
        const float mean_g_xhat =
            simd::lane_sum(C, [&](std::size_t c) { return dy[c] * weight[c] * layernorm_normalize(x[c], m, s); }) /
            width;
        float* __restrict dx = dinp + n * C;
        for (std::size_t c = 0; c < C; ++c) {
            const float xhat = layernorm_normalize(x[c], m, s);
            dbias[c] += dy[c];
            dweight[c] += dy[c] * xhat;
            dx[c] += layernorm_input_gradient(dy[c] * weight[c], xhat, mean_g, mean_g_xhat, s);
        }
    }
}

}  // namespace

// out (N,C), mean (N), rstd (N); inp (N,C), weight (C), bias (C)
void CpuOps::layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                               const float* bias, int N, int C) {
    simd::run(kernels_, [&]() PARBENCH_SIMD_BODY {
        layernorm_forward_rows(out, mean, rstd, inp, weight, bias, static_cast<std::size_t>(N),
                               static_cast<std::size_t>(C));
    });
}

void CpuOps::layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                                const float* weight, const float* mean, const float* rstd, int N, int C) {
    simd::run(kernels_, [&]() PARBENCH_SIMD_BODY {
        layernorm_backward_rows(dinp, dweight, dbias, dout, inp, weight, mean, rstd, static_cast<std::size_t>(N),
                                static_cast<std::size_t>(C));
    });
}

}  // namespace parbench
