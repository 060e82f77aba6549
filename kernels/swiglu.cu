// SwiGLU's elementwise product on the GPU with the shared formulas of swiglu_math.hpp.
// Backward accumulates (+=).
#include "core/nvtx.hpp"
#include "device/cuda_check.hpp"
#include "kernels/ops_kernel_support.cuh"
#include "kernels/ops_launchers.hpp"
#include "kernels/swiglu_math.hpp"

namespace parbench {
namespace {

using namespace ops_kernels;

__global__ void swiglu_forward_kernel(float* out, const float* gate, const float* up, std::size_t n) {
    for (std::size_t i = global_thread(); i < n; i += grid_threads()) out[i] = silu(gate[i]) * up[i];
}

__global__ void swiglu_backward_kernel(float* dgate, float* dup, const float* dout, const float* gate,
                                       const float* up, std::size_t n) {
    for (std::size_t i = global_thread(); i < n; i += grid_threads()) {
        dgate[i] += dout[i] * up[i] * silu_derivative(gate[i]);
        dup[i] += dout[i] * silu(gate[i]);
    }
}

}  // namespace

void launch_swiglu_forward(float* out, const float* gate, const float* up, std::size_t n, GpuStream stream) {
    NvtxRange range("swiglu_forward");
    swiglu_forward_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(out, gate, up, n);
    check_cuda(cudaGetLastError(), "swiglu_forward_kernel launch");
}

void launch_swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                            std::size_t n, GpuStream stream) {
    NvtxRange range("swiglu_backward");
    swiglu_backward_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(dgate, dup, dout, gate, up, n);
    check_cuda(cudaGetLastError(), "swiglu_backward_kernel launch");
}

}  // namespace parbench
