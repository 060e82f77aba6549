// GELU, tanh approximation (Hendrycks & Gimpel, arXiv 1606.08415, eq. for GPT-2's "gelu_new"):
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
// Shared by the CPU ops and the CUDA kernels so both run the same formula.
// Evaluated through 0.5 (1 + tanh(u)) = sigmoid(2u) = 1 / (1 + exp(-2u)): one fast_exp and a
// division, no tanhf call, so the CPU loops vectorise; and no cancellation in 1 + tanh(u) where
// tanh(u) is near -1 (the far left, where GELU is small).
#pragma once

#include "fast_exp_math.hpp"
#include "host_device.hpp"

namespace parbench {

constexpr float gelu_sqrt_2_over_pi = 0.7978845608028654f;
constexpr float gelu_cubic_coefficient = 0.044715f;

// sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3): GELU's gate, 0.5 (1 + tanh(u)).
PARBENCH_HD float gelu_gate(float x) {
    const float inner = gelu_sqrt_2_over_pi * (x + gelu_cubic_coefficient * x * x * x);
    return 1.0f / (1.0f + fast_exp(-2.0f * inner));
}

PARBENCH_HD float gelu(float x) { return x * gelu_gate(x); }

// d gelu / dx, differentiating the tanh approximation itself (not the exact erf GELU), so
// that backward is the true gradient of what forward computed.
// With s = sigmoid(2u): d/dx [x s] = s + x * 2 s (1 - s) * du/dx, since
// d/du 0.5 (1 + tanh u) = 0.5 (1 - tanh^2 u) = 2 s (1 - s).
PARBENCH_HD float gelu_derivative(float x) {
    const float gate = gelu_gate(x);
    const float dinner_dx = gelu_sqrt_2_over_pi * (1.0f + 3.0f * gelu_cubic_coefficient * x * x);
    return gate + 2.0f * x * gate * (1.0f - gate) * dinner_dx;
}

}  // namespace parbench
