// GELU, tanh approximation (Hendrycks & Gimpel, arXiv 1606.08415, eq. for GPT-2's "gelu_new"):
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
// Shared by the CPU ops and the CUDA kernels so both run the same formula.
#pragma once

#include <cmath>

#include "host_device.hpp"

namespace parbench {

constexpr float gelu_sqrt_2_over_pi = 0.7978845608028654f;
constexpr float gelu_cubic_coefficient = 0.044715f;

PARBENCH_HD float gelu(float x) {
    const float inner = gelu_sqrt_2_over_pi * (x + gelu_cubic_coefficient * x * x * x);
    return 0.5f * x * (1.0f + tanhf(inner));
}

// d gelu / dx, differentiating the tanh approximation itself (not the exact erf GELU), so
// that backward is the true gradient of what forward computed.
PARBENCH_HD float gelu_derivative(float x) {
    const float inner = gelu_sqrt_2_over_pi * (x + gelu_cubic_coefficient * x * x * x);
    const float tanh_inner = tanhf(inner);
    const float dinner_dx = gelu_sqrt_2_over_pi * (1.0f + 3.0f * gelu_cubic_coefficient * x * x);
    return 0.5f * (1.0f + tanh_inner) + 0.5f * x * (1.0f - tanh_inner * tanh_inner) * dinner_dx;
}

}  // namespace parbench
