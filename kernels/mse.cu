// Mean squared error per row on the GPU: a warp per row forward, a thread per element
// backward (+=).
#include "core/nvtx.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/mse_math.hpp"
#include "kernels/ops_kernel_support.cuh"
#include "kernels/ops_launchers.hpp"

namespace parbench {
namespace {

using namespace ops_kernels;

__global__ void mse_forward_kernel(float* losses, const float* pred, const float* target, int N, int D) {
    for (std::size_t n = global_warp(); n < static_cast<std::size_t>(N); n += grid_warps()) {
        float sum = 0.0f;
        for (int d = lane(); d < D; d += 32) sum += squared_error(pred[n * D + d], target[n * D + d]);
        sum = warp_sum(sum);
        if (lane() == 0) losses[n] = sum / D;
    }
}

__global__ void mse_backward_kernel(float* dpred, const float* dlosses, const float* pred, const float* target, int N,
                                    int D) {
    const std::size_t count = static_cast<std::size_t>(N) * D;
    for (std::size_t i = global_thread(); i < count; i += grid_threads())
        dpred[i] += mse_pred_gradient(pred[i], target[i], D, dlosses[i / D]);
}

}  // namespace

void launch_mse_forward(float* losses, const float* pred, const float* target, int N, int D, GpuStream stream) {
    NvtxRange range("mse_forward");
    mse_forward_kernel<<<blocks_for_rows(N), threads_per_block, 0, stream>>>(losses, pred, target, N, D);
    check_cuda(cudaGetLastError(), "mse_forward_kernel launch");
}

void launch_mse_backward(float* dpred, const float* dlosses, const float* pred, const float* target, int N, int D,
                         GpuStream stream) {
    NvtxRange range("mse_backward");
    mse_backward_kernel<<<blocks_for(static_cast<std::size_t>(N) * D), threads_per_block, 0, stream>>>(
        dpred, dlosses, pred, target, N, D);
    check_cuda(cudaGetLastError(), "mse_backward_kernel launch");
}

}  // namespace parbench
