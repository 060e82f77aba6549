// SwiGLU (Shazeer, arXiv 2002.05202 eq. 5), the gated MLP of Llama:
//   out = silu(gate) * up,  silu(x) = x * sigmoid(x)
// gate = x W_gateᵀ and up = x W_upᵀ are two matmuls; this is the elementwise product between
// them and W_down. Backward: dgate = dout * up * silu'(gate), dup = dout * silu(gate), with
//   silu'(x) = sigmoid(x) * (1 + x * (1 - sigmoid(x))).
#pragma once

#include "fast_exp_math.hpp"
#include "host_device.hpp"

namespace parbench {

PARBENCH_HD float sigmoid(float x) { return 1.0f / (1.0f + fast_exp(-x)); }

PARBENCH_HD float silu(float x) { return x * sigmoid(x); }

PARBENCH_HD float silu_derivative(float x) {
    const float s = sigmoid(x);
    return s * (1.0f + x * (1.0f - s));
}

}  // namespace parbench
