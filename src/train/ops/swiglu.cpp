// SwiGLU's elementwise product on the CPU. Backward accumulates (+=) into dgate and dup.
#include "kernels/swiglu_math.hpp"
#include "train/ops/cpu_ops.hpp"

namespace parbench {

void CpuOps::swiglu_forward(float* out, const float* gate, const float* up, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) out[i] = silu(gate[i]) * up[i];
}

void CpuOps::swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                             std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        dgate[i] += dout[i] * up[i] * silu_derivative(gate[i]);
        dup[i] += dout[i] * silu(gate[i]);
    }
}

}  // namespace parbench
