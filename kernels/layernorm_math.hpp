// LayerNorm over the last dimension (Ba, Kiros & Hinton, arXiv 1607.06450):
//   y = (x - mean) * rstd * weight + bias,  rstd = 1 / sqrt(var + eps), var biased (divide by C)
// Backward per row, with xhat = (x - mean) * rstd and g = dy * weight:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
#pragma once

#include <cmath>

#include "host_device.hpp"

namespace parbench {

// GPT-2's epsilon.
constexpr float layernorm_epsilon = 1e-5f;

PARBENCH_HD float layernorm_rstd(float variance) { return 1.0f / sqrtf(variance + layernorm_epsilon); }

PARBENCH_HD float layernorm_normalize(float x, float mean, float rstd) { return (x - mean) * rstd; }

// One element of dx, given the row means of g and of g * xhat.
PARBENCH_HD float layernorm_input_gradient(float g, float xhat, float mean_g, float mean_g_xhat, float rstd) {
    return rstd * (g - mean_g - xhat * mean_g_xhat);
}

}  // namespace parbench
