// GELU on the GPU with the shared formulas of gelu_math.hpp and gradient_write_math.hpp.
// Backward accumulates (+=) into dinp, or writes it (=) in the first-write form.
#include "core/nvtx.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/gelu_math.hpp"
#include "kernels/gradient_write_math.hpp"
#include "kernels/ops_kernel_support.cuh"
#include "kernels/ops_launchers.hpp"

namespace parbench {
namespace {

using namespace ops_kernels;

__global__ void gelu_forward_kernel(float* out, const float* inp, std::size_t n) {
    for (std::size_t i = global_thread(); i < n; i += grid_threads()) out[i] = gelu(inp[i]);
}

template <GradientWrite write>
__global__ void gelu_backward_kernel(float* dinp, const float* inp, const float* dout, std::size_t n) {
    for (std::size_t i = global_thread(); i < n; i += grid_threads())
        write_gradient<write>(dinp[i], gelu_input_gradient(inp[i], dout[i]));
}

}  // namespace

void launch_gelu_forward(float* out, const float* inp, std::size_t n, GpuStream stream) {
    NvtxRange range("gelu_forward");
    gelu_forward_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(out, inp, n);
    check_cuda(cudaGetLastError(), "gelu_forward_kernel launch");
}

void launch_gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n, GradientWrite write,
                          GpuStream stream) {
    if (write == GradientWrite::overwrite) {
        NvtxRange range("gelu_backward_overwrite");
        gelu_backward_kernel<GradientWrite::overwrite><<<blocks_for(n), threads_per_block, 0, stream>>>(dinp, inp,
                                                                                                         dout, n);
    } else {
        NvtxRange range("gelu_backward");
        gelu_backward_kernel<GradientWrite::accumulate><<<blocks_for(n), threads_per_block, 0, stream>>>(dinp, inp,
                                                                                                          dout, n);
    }
    check_cuda(cudaGetLastError(), "gelu_backward_kernel launch");
}

}  // namespace parbench
