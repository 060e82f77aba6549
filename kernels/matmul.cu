// The parts of a linear layer around cuBLAS's GEMM (which CudaOps calls): adding the bias,
// the bias gradient (+=) and the fp32 -> bf16 cast feeding bf16 GEMMs.
#include "core/nvtx.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/ops_kernel_support.cuh"
#include "kernels/ops_launchers.hpp"

namespace parbench {
namespace {

using namespace ops_kernels;

// out (N,OC) += bias (OC) on every row
__global__ void add_bias_kernel(float* out, const float* bias, int N, int OC) {
    const std::size_t count = static_cast<std::size_t>(N) * OC;
    for (std::size_t i = global_thread(); i < count; i += grid_threads()) out[i] += bias[i % OC];
}

// dout as float, whether it is stored as float or bf16
__device__ inline float as_float(float value) { return value; }
__device__ inline float as_float(BFloat16 value) { return to_float(value); }

// dbias (OC) += column sums of dout (N,OC)
template <typename T>
__global__ void __launch_bounds__(column_sum_threads) bias_backward_kernel(float* dbias, const T* dout, int N, int OC) {
    const auto columns = static_cast<std::size_t>(OC);
    column_sums<1>(
        static_cast<std::size_t>(N), columns,
        [&](std::size_t n, std::size_t o, float* sums) { sums[0] += as_float(dout[n * columns + o]); },
        [&](std::size_t o, const float* totals) { dbias[o] += totals[0]; });
}

__global__ void cast_to_bf16_kernel(BFloat16* out, const float* inp, std::size_t n) {
    for (std::size_t i = global_thread(); i < n; i += grid_threads()) out[i] = to_bfloat16(inp[i]);
}

}  // namespace

void launch_add_bias(float* out, const float* bias, int N, int OC, GpuStream stream) {
    NvtxRange range("add_bias");
    add_bias_kernel<<<blocks_for(static_cast<std::size_t>(N) * OC), threads_per_block, 0, stream>>>(out, bias, N, OC);
    check_cuda(cudaGetLastError(), "add_bias_kernel launch");
}

void launch_bias_backward(float* dbias, const float* dout, int N, int OC, GpuStream stream) {
    NvtxRange range("bias_backward");
    bias_backward_kernel<float><<<blocks_for_columns(OC), column_sum_threads, 0, stream>>>(dbias, dout, N, OC);
    check_cuda(cudaGetLastError(), "bias_backward_kernel<float> launch");
}

void launch_bias_backward_bf16(float* dbias, const BFloat16* dout, int N, int OC, GpuStream stream) {
    NvtxRange range("bias_backward_bf16");
    bias_backward_kernel<BFloat16><<<blocks_for_columns(OC), column_sum_threads, 0, stream>>>(dbias, dout, N, OC);
    check_cuda(cudaGetLastError(), "bias_backward_kernel<BFloat16> launch");
}

void launch_cast_to_bf16(BFloat16* out, const float* inp, std::size_t n, GpuStream stream) {
    NvtxRange range("cast_to_bf16");
    cast_to_bf16_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(out, inp, n);
    check_cuda(cudaGetLastError(), "cast_to_bf16_kernel launch");
}

}  // namespace parbench
