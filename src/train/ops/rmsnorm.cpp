// RMSNorm on the CPU. Backward accumulates (+=) into dinp and dweight.
#include <cstddef>

#include "kernels/rmsnorm_math.hpp"
#include "train/ops/cpu_ops.hpp"

namespace parbench {

// out (N,C), rstd (N); inp (N,C), weight (C)
void CpuOps::rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C,
                             float eps) {
    for (std::size_t n = 0; n < static_cast<std::size_t>(N); ++n) {
        const float* x = inp + n * C;
        float squares = 0.0f;
        for (int c = 0; c < C; ++c) squares += x[c] * x[c];
        const float s = rmsnorm_rstd(squares / C, eps);
        float* y = out + n * C;
        for (int c = 0; c < C; ++c) y[c] = x[c] * s * weight[c];
        rstd[n] = s;
    }
}

void CpuOps::rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                              const float* rstd, int N, int C) {
    for (std::size_t n = 0; n < static_cast<std::size_t>(N); ++n) {
        const float* x = inp + n * C;
        const float* dy = dout + n * C;
        const float s = rstd[n];
        float sum_g_xhat = 0.0f;
        for (int c = 0; c < C; ++c) sum_g_xhat += dy[c] * weight[c] * x[c] * s;
        const float mean_g_xhat = sum_g_xhat / C;
        float* dx = dinp + n * C;
        for (int c = 0; c < C; ++c) {
            const float xhat = x[c] * s;
            dweight[c] += dy[c] * xhat;
            dx[c] += rmsnorm_input_gradient(dy[c] * weight[c], xhat, mean_g_xhat, s);
        }
    }
}

}  // namespace parbench
