// SwiGLU's elementwise product on the CPU. Backward accumulates (+=) into dgate and dup (the
// overwrite form writes them).
// Branch-free loops over swiglu_math.hpp's sigmoid (fast_exp): they vectorise.
#include "kernels/swiglu_math.hpp"
#include "train/ops/cpu_ops.hpp"
#include "train/ops/cpu_simd.hpp"

namespace parbench {
namespace {

PARBENCH_SIMD_LOOP void swiglu_forward_loop(float* __restrict out, const float* __restrict gate,
                                            const float* __restrict up, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) out[i] = silu(gate[i]) * up[i];
}

PARBENCH_SIMD_LOOP void swiglu_backward_loop(float* __restrict dgate, float* __restrict dup,
                                             const float* __restrict dout, const float* __restrict gate,
                                             const float* __restrict up, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        // silu and silu_derivative share one sigmoid once inlined (common subexpression).
        dgate[i] += dout[i] * up[i] * silu_derivative(gate[i]);
        dup[i] += dout[i] * silu(gate[i]);
    }
}

PARBENCH_SIMD_LOOP void swiglu_backward_overwrite_loop(float* __restrict dgate, float* __restrict dup,
                                                       const float* __restrict dout, const float* __restrict gate,
                                                       const float* __restrict up, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        dgate[i] = dout[i] * up[i] * silu_derivative(gate[i]);
        dup[i] = dout[i] * silu(gate[i]);
    }
}

}  // namespace

void CpuOps::swiglu_forward(float* out, const float* gate, const float* up, std::size_t n) {
    simd::run(kernels_, [&]() PARBENCH_SIMD_BODY { swiglu_forward_loop(out, gate, up, n); });
}

void CpuOps::swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                             std::size_t n) {
    simd::run(kernels_, [&]() PARBENCH_SIMD_BODY { swiglu_backward_loop(dgate, dup, dout, gate, up, n); });
}

void CpuOps::swiglu_backward_overwrite(float* dgate, float* dup, const float* dout, const float* gate,
                                       const float* up, std::size_t n) {
    simd::run(kernels_, [&]() PARBENCH_SIMD_BODY { swiglu_backward_overwrite_loop(dgate, dup, dout, gate, up, n); });
}

}  // namespace parbench
