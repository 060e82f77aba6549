// LayerNorm on the CPU. Backward accumulates (+=) into dinp, dweight, dbias.
#include <cstddef>

#include "kernels/layernorm_math.hpp"
#include "train/ops/cpu_ops.hpp"

namespace parbench {

// out (N,C), mean (N), rstd (N); inp (N,C), weight (C), bias (C)
void CpuOps::layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                               const float* bias, int N, int C) {
    for (std::size_t n = 0; n < static_cast<std::size_t>(N); ++n) {
        const float* x = inp + n * C;
        float sum = 0.0f;
        for (int c = 0; c < C; ++c) sum += x[c];
        const float m = sum / C;
        // Two passes (mean, then squared deviations) rather than E[x^2] - E[x]^2, which
        // cancels badly when the mean is large against the spread.
        float squares = 0.0f;
        for (int c = 0; c < C; ++c) squares += (x[c] - m) * (x[c] - m);
        const float s = layernorm_rstd(squares / C);
        float* y = out + n * C;
        for (int c = 0; c < C; ++c) y[c] = layernorm_normalize(x[c], m, s) * weight[c] + bias[c];
        mean[n] = m;
        rstd[n] = s;
    }
}

void CpuOps::layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                                const float* weight, const float* mean, const float* rstd, int N, int C) {
    for (std::size_t n = 0; n < static_cast<std::size_t>(N); ++n) {
        const float* x = inp + n * C;
        const float* dy = dout + n * C;
        const float m = mean[n];
        const float s = rstd[n];
        float sum_g = 0.0f;
        float sum_g_xhat = 0.0f;
        for (int c = 0; c < C; ++c) {
            const float g = dy[c] * weight[c];
            sum_g += g;
            sum_g_xhat += g * layernorm_normalize(x[c], m, s);
        }
        const float mean_g = sum_g / C;
        const float mean_g_xhat = sum_g_xhat / C;
        float* dx = dinp + n * C;
        for (int c = 0; c < C; ++c) {
            const float xhat = layernorm_normalize(x[c], m, s);
            dbias[c] += dy[c];
            dweight[c] += dy[c] * xhat;
            dx[c] += layernorm_input_gradient(dy[c] * weight[c], xhat, mean_g, mean_g_xhat, s);
        }
    }
}

}  // namespace parbench
