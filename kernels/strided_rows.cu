// Strided row copies on the GPU, the packing and unpacking of context parallelism's
// resharding: copy_rows is one cudaMemcpy2DAsync, add_rows a thread per element.
#include "kernels/cuda_check.hpp"
#include "kernels/ops_kernel_support.cuh"
#include "kernels/ops_launchers.hpp"

namespace parbench {
namespace {

using namespace ops_kernels;

// dst[r*dst_pitch + i] += src[r*src_pitch + i] for i < width
__global__ void add_rows_kernel(float* dst, std::size_t dst_pitch, const float* src, std::size_t src_pitch,
                                std::size_t width, std::size_t rows) {
    for (std::size_t n = global_thread(); n < width * rows; n += grid_threads()) {
        const std::size_t r = n / width, i = n % width;
        dst[r * dst_pitch + i] += src[r * src_pitch + i];
    }
}

}  // namespace

void launch_copy_rows(float* dst, std::size_t dst_pitch, const float* src, std::size_t src_pitch, std::size_t width,
                      std::size_t rows, GpuStream stream) {
    if (width == 0 || rows == 0) return;
    check_cuda(cudaMemcpy2DAsync(dst, dst_pitch * sizeof(float), src, src_pitch * sizeof(float),
                                 width * sizeof(float), rows, cudaMemcpyDeviceToDevice, stream),
               "cudaMemcpy2DAsync(copy_rows)");
}

void launch_add_rows(float* dst, std::size_t dst_pitch, const float* src, std::size_t src_pitch, std::size_t width,
                     std::size_t rows, GpuStream stream) {
    if (width == 0 || rows == 0) return;
    add_rows_kernel<<<blocks_for(width * rows), threads_per_block, 0, stream>>>(dst, dst_pitch, src, src_pitch,
                                                                                width, rows);
    check_cuda(cudaGetLastError(), "add_rows_kernel launch");
}

}  // namespace parbench
