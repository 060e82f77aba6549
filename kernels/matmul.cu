// The parts of a linear layer around cuBLAS's GEMM (which CudaOps calls): adding the bias,
// the bias gradient (+=) and the fp32 -> bf16 cast feeding bf16 GEMMs.
#include "core/nvtx.hpp"
#include "device/cuda_check.hpp"
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

// Column sums: a block of 32 warps per 32 neighbouring columns (a thread per column would leave
// all but OC threads of the GPU idle, each walking all N rows).
constexpr unsigned column_sum_warps = 32;

// dbias (OC) += column sums of dout (N,OC). Lane l of every warp takes column first + l, warp w
// the rows w, w + 32, ...: a warp reads 32 neighbouring floats of one row at a time. The warps'
// partial sums are then added in warp order through shared memory: no atomics, deterministic.
template <typename T>
__global__ void bias_backward_kernel(float* dbias, const T* dout, int N, int OC) {
    __shared__ float partial[column_sum_warps][32];
    const unsigned warp = threadIdx.x / 32;
    for (std::size_t first = static_cast<std::size_t>(blockIdx.x) * 32; first < static_cast<std::size_t>(OC);
         first += static_cast<std::size_t>(gridDim.x) * 32) {
        const std::size_t o = first + lane();
        float sum = 0.0f;
        if (o < static_cast<std::size_t>(OC))
            for (std::size_t n = warp; n < static_cast<std::size_t>(N); n += column_sum_warps)
                sum += as_float(dout[n * OC + o]);
        partial[warp][lane()] = sum;
        __syncthreads();
        if (warp == 0 && o < static_cast<std::size_t>(OC)) {
            float total = 0.0f;
            for (unsigned w = 0; w < column_sum_warps; ++w) total += partial[w][lane()];
            dbias[o] += total;
        }
        __syncthreads();  // the next columns' partial sums overwrite these
    }
}

unsigned blocks_for_columns(int OC) {
    return static_cast<unsigned>(std::clamp<std::size_t>((static_cast<std::size_t>(OC) + 31) / 32, 1, max_blocks));
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
    bias_backward_kernel<float><<<blocks_for_columns(OC), column_sum_warps * 32, 0, stream>>>(dbias, dout, N, OC);
    check_cuda(cudaGetLastError(), "bias_backward_kernel<float> launch");
}

void launch_bias_backward_bf16(float* dbias, const BFloat16* dout, int N, int OC, GpuStream stream) {
    NvtxRange range("bias_backward_bf16");
    bias_backward_kernel<BFloat16><<<blocks_for_columns(OC), column_sum_warps * 32, 0, stream>>>(dbias, dout, N,
                                                                                               OC);
    check_cuda(cudaGetLastError(), "bias_backward_kernel<BFloat16> launch");
}

void launch_cast_to_bf16(BFloat16* out, const float* inp, std::size_t n, GpuStream stream) {
    NvtxRange range("cast_to_bf16");
    cast_to_bf16_kernel<<<blocks_for(n), threads_per_block, 0, stream>>>(out, inp, n);
    check_cuda(cudaGetLastError(), "cast_to_bf16_kernel launch");
}

}  // namespace parbench
