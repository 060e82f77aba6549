// Rotary position embedding on the GPU with the shared formulas of rope_math.hpp: a thread
// per channel pair, in place on (B,T,H*hs).
#include "core/nvtx.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/ops_kernel_support.cuh"
#include "kernels/ops_launchers.hpp"
#include "kernels/rope_math.hpp"

namespace parbench {
namespace {

using namespace ops_kernels;

__global__ void rope_kernel(float* x, const int* positions, int B, int T, int H, int hs, float theta,
                            float direction) {
    const std::size_t pairs_per_head = static_cast<std::size_t>(hs) / 2;
    const std::size_t count = static_cast<std::size_t>(B) * T * H * pairs_per_head;
    for (std::size_t k = global_thread(); k < count; k += grid_threads()) {
        const int pair = static_cast<int>(k % pairs_per_head);
        const std::size_t head_row = k / pairs_per_head;  // (b·T + t)·H + h
        const std::size_t t = (head_row / H) % T;
        float* head = x + head_row * hs;
        rope_rotate(head[2 * pair], head[2 * pair + 1], rope_angle(positions[t], pair, hs, theta), direction);
    }
}

void launch_rope(float* x, const int* positions, int B, int T, int H, int hs, float theta, float direction,
                 GpuStream stream) {
    const std::size_t pairs = static_cast<std::size_t>(B) * T * H * (hs / 2);
    rope_kernel<<<blocks_for(pairs), threads_per_block, 0, stream>>>(x, positions, B, T, H, hs, theta, direction);
    check_cuda(cudaGetLastError(), "rope_kernel launch");
}

}  // namespace

void launch_rope_forward(float* x, const int* positions, int B, int T, int H, int hs, float theta, GpuStream stream) {
    NvtxRange range("rope_forward");
    launch_rope(x, positions, B, T, H, hs, theta, 1.0f, stream);
}

void launch_rope_backward(float* dx, const int* positions, int B, int T, int H, int hs, float theta,
                          GpuStream stream) {
    NvtxRange range("rope_backward");
    launch_rope(dx, positions, B, T, H, hs, theta, -1.0f, stream);
}

}  // namespace parbench
