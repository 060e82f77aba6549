// SwiGLU's elementwise product on the GPU with the shared formulas of swiglu_math.hpp and
// gradient_write_math.hpp. Backward accumulates (+=) into dgate and dup, or writes them (=)
// in the first-write form.
#include "core/nvtx.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/gradient_write_math.hpp"
#include "kernels/ops_kernel_support.cuh"
#include "kernels/ops_launchers.hpp"
#include "kernels/swiglu_math.hpp"

namespace parbench {
namespace {

using namespace ops_kernels;

__global__ void swiglu_forward_kernel(float* out, const float* gate, const float* up, std::size_t n) {
    for (std::size_t i = global_thread(); i < n; i += grid_threads()) out[i] = silu(gate[i]) * up[i];
}

template <GradientWrite write>
__global__ void swiglu_backward_kernel(float* dgate, float* dup, const float* dout, const float* gate,
                                       const float* up, std::size_t n) {
    for (std::size_t i = global_thread(); i < n; i += grid_threads()) {
        write_gradient<write>(dgate[i], swiglu_gate_gradient(dout[i], gate[i], up[i]));
        write_gradient<write>(dup[i], swiglu_up_gradient(dout[i], gate[i]));
    }
}

}  // namespace

void launch_swiglu_forward(float* out, const float* gate, const float* up, std::size_t n, GpuStream stream) {
    NvtxRange range("swiglu_forward");
    swiglu_forward_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(out, gate, up, n);
    check_cuda(cudaGetLastError(), "swiglu_forward_kernel launch");
}

void launch_swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                            std::size_t n, GradientWrite write, GpuStream stream) {
    if (write == GradientWrite::overwrite) {
        NvtxRange range("swiglu_backward_overwrite");
        swiglu_backward_kernel<GradientWrite::overwrite><<<blocks_for(n), threads_per_block, 0, stream>>>(
            dgate, dup, dout, gate, up, n);
    } else {
        NvtxRange range("swiglu_backward");
        swiglu_backward_kernel<GradientWrite::accumulate><<<blocks_for(n), threads_per_block, 0, stream>>>(
            dgate, dup, dout, gate, up, n);
    }
    check_cuda(cudaGetLastError(), "swiglu_backward_kernel launch");
}

}  // namespace parbench
