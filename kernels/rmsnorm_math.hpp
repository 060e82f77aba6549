// RMSNorm over the last dimension (Zhang & Sennrich, arXiv 1910.07467), Llama's norm:
//   y = x * rstd * weight,  rstd = 1 / sqrt(mean(x²) + eps)    (no mean subtraction, no bias)
// Backward per row, with xhat = x * rstd and g = dy * weight:
//   dx = rstd * (g - xhat * mean(g * xhat)),  dweight += dy * xhat
// Shared by the CPU ops and the CUDA kernels so both run the same formula.
#pragma once

#include <cmath>

#include "host_device.hpp"

namespace parbench {

PARBENCH_HD float rmsnorm_rstd(float mean_square, float eps) { return 1.0f / sqrtf(mean_square + eps); }

// One element of dx, given the row mean of g * xhat.
PARBENCH_HD float rmsnorm_input_gradient(float g, float xhat, float mean_g_xhat, float rstd) {
    return rstd * (g - xhat * mean_g_xhat);
}

}  // namespace parbench
