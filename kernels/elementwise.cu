// Elementwise training ops on the GPU: one thread per element, grid-stride loops.
#include "core/nvtx.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/ops_kernel_support.cuh"
#include "kernels/ops_launchers.hpp"

namespace parbench {
namespace {

using namespace ops_kernels;

__global__ void residual_forward_kernel(float* out, const float* a, const float* b, std::size_t n) {
    for (std::size_t i = global_thread(); i < n; i += grid_threads()) out[i] = a[i] + b[i];
}

__global__ void add_inplace_kernel(float* acc, const float* x, std::size_t n) {
    for (std::size_t i = global_thread(); i < n; i += grid_threads()) acc[i] += x[i];
}

__global__ void scale_kernel(float* x, float factor, std::size_t n) {
    for (std::size_t i = global_thread(); i < n; i += grid_threads()) x[i] *= factor;
}

__global__ void fill_kernel(float* x, float value, std::size_t n) {
    for (std::size_t i = global_thread(); i < n; i += grid_threads()) x[i] = value;
}

}  // namespace

void launch_residual_forward(float* out, const float* a, const float* b, std::size_t n, GpuStream stream) {
    NvtxRange range("residual_forward");
    residual_forward_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(out, a, b, n);
    check_cuda(cudaGetLastError(), "residual_forward_kernel launch");
}

void launch_add_inplace(float* acc, const float* x, std::size_t n, GpuStream stream) {
    NvtxRange range("add_inplace");
    add_inplace_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(acc, x, n);
    check_cuda(cudaGetLastError(), "add_inplace_kernel launch");
}

void launch_scale(float* x, float factor, std::size_t n, GpuStream stream) {
    NvtxRange range("scale");
    scale_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(x, factor, n);
    check_cuda(cudaGetLastError(), "scale_kernel launch");
}

void launch_fill(float* x, float value, std::size_t n, GpuStream stream) {
    NvtxRange range("fill");
    fill_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(x, value, n);
    check_cuda(cudaGetLastError(), "fill_kernel launch");
}

}  // namespace parbench
