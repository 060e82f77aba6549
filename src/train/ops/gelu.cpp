// GELU (tanh approximation) on the CPU. Backward accumulates (+=) into dinp.
#include "kernels/gelu_math.hpp"
#include "train/ops/cpu_ops.hpp"

namespace parbench {

void CpuOps::gelu_forward(float* out, const float* inp, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) out[i] = gelu(inp[i]);
}

void CpuOps::gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) dinp[i] += gelu_derivative(inp[i]) * dout[i];
}

}  // namespace parbench
