// GELU on the GPU with the shared formula of gelu_math.hpp. Backward accumulates (+=).
#include "core/nvtx.hpp"
#include "device/cuda_check.hpp"
#include "kernels/gelu_math.hpp"
#include "kernels/ops_kernel_support.cuh"
#include "kernels/ops_launchers.hpp"

namespace parbench {
namespace {

using namespace ops_kernels;

__global__ void gelu_forward_kernel(float* out, const float* inp, std::size_t n) {
    for (std::size_t i = global_thread(); i < n; i += grid_threads()) out[i] = gelu(inp[i]);
}

__global__ void gelu_backward_kernel(float* dinp, const float* inp, const float* dout, std::size_t n) {
    for (std::size_t i = global_thread(); i < n; i += grid_threads()) dinp[i] += gelu_derivative(inp[i]) * dout[i];
}

}  // namespace

void launch_gelu_forward(float* out, const float* inp, std::size_t n, GpuStream stream) {
    NvtxRange range("gelu_forward");
    gelu_forward_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(out, inp, n);
    check_cuda(cudaGetLastError(), "gelu_forward_kernel launch");
}

void launch_gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n, GpuStream stream) {
    NvtxRange range("gelu_backward");
    gelu_backward_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(dinp, inp, dout, n);
    check_cuda(cudaGetLastError(), "gelu_backward_kernel launch");
}

}  // namespace parbench
