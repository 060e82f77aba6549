// GELU (tanh approximation) on the CPU. Backward accumulates (+=) into dinp (the overwrite form
// writes it). The loops are
// branch-free and call no library function (gelu_math.hpp's fast_exp), so they vectorise.
#include "kernels/gelu_math.hpp"
#include "train/ops/cpu_ops.hpp"
#include "train/ops/cpu_simd.hpp"

namespace parbench {
namespace {

PARBENCH_SIMD_LOOP void gelu_forward_loop(float* __restrict out, const float* __restrict inp, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) out[i] = gelu(inp[i]);
}

PARBENCH_SIMD_LOOP void gelu_backward_loop(float* __restrict dinp, const float* __restrict inp,
                                           const float* __restrict dout, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) dinp[i] += gelu_derivative(inp[i]) * dout[i];
}

PARBENCH_SIMD_LOOP void gelu_backward_overwrite_loop(float* __restrict dinp, const float* __restrict inp,
                                                     const float* __restrict dout, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) dinp[i] = gelu_derivative(inp[i]) * dout[i];
}

}  // namespace

void CpuOps::gelu_forward(float* out, const float* inp, std::size_t n) {
    simd::run(kernels_, [&]() PARBENCH_SIMD_BODY { gelu_forward_loop(out, inp, n); });
}

void CpuOps::gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n) {
    simd::run(kernels_, [&]() PARBENCH_SIMD_BODY { gelu_backward_loop(dinp, inp, dout, n); });
}

void CpuOps::gelu_backward_overwrite(float* dinp, const float* inp, const float* dout, std::size_t n) {
    simd::run(kernels_, [&]() PARBENCH_SIMD_BODY { gelu_backward_overwrite_loop(dinp, inp, dout, n); });
}

}  // namespace parbench
